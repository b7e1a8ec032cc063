/* A one-shot breakpoint at a new program's entry point (AT_ENTRY), for its ptracer (hold.c):
 * there its dynamic linker has loaded and initialized its libraries and its own code has not
 * run yet, the earliest moment a library can be dlopen'ed into it (--inject -- CMD). */
#ifndef MEMTRACED_PROCESS_ENTRY_BREAK_H
#define MEMTRACED_PROCESS_ENTRY_BREAK_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct entry_break {
	uint64_t addr;  /* the entry point */
	uint8_t saved;  /* the byte the int3 replaced */
	bool armed;
};

/* At pid's exec-stop (the new image mapped): plants an int3 at its entry. 0, or -1. */
int entry_break_plant(pid_t pid, struct entry_break *b);
/* At a SIGTRAP signal-delivery-stop of tid: was it our breakpoint? Then the byte is back, rip
 * is the entry again, the breakpoint is gone, and true (the SIGTRAP must not be delivered). */
bool entry_break_hit(pid_t tid, struct entry_break *b);
/* Takes an armed breakpoint out (detaching before the program got there). */
void entry_break_remove(pid_t pid, struct entry_break *b);

#endif
