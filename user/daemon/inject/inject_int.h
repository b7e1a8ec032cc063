/* Internals of the injector (user/daemon/inject/). */
#ifndef MEMTRACED_INJECT_INT_H
#define MEMTRACED_INJECT_INT_H
#include <stdarg.h>
#include <stdbool.h>

#include "inject.h"

/* snprintf into err (NULL/0 allowed). */
void inject_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The thread to stop: the main thread when it is blocked in a system call, else a thread
 * blocked in a system call other than futex (unlikely to hold a lock the call needs), else
 * the main thread (target_checks.c). */
pid_t inject_pick_thread(pid_t pid);

/* Address of a `syscall` instruction (0f 05) in an executable mapping of pid: the return
 * address of injected calls (remote_syms.c). */
int inject_find_syscall_insn(pid_t pid, uint64_t *addr, char *err, size_t errlen);

/* Reads/writes the target's memory through /proc/PID/mem (fd from inject_mem_open). */
int inject_mem_open(pid_t pid, bool writable);
int inject_mem_read(int fd, uint64_t addr, void *buf, size_t len);
int inject_mem_write(int fd, uint64_t addr, const void *buf, size_t len);
/* A NUL-terminated string of at most len-1 bytes from the target. */
int inject_mem_read_str(int fd, uint64_t addr, char *buf, size_t len);

#endif
