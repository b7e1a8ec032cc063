/* A breakpoint at a program's entry point (see entry_break.h). Written through /proc/PID/mem,
 * which writes into the process's private copy of the text page, as a debugger does. */
#include "entry_break.h"
#include "door/door.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <unistd.h>

static int mem_rw(pid_t pid, uint64_t addr, uint8_t *byte, bool write)
{
	int fd = door_proc_open(pid, "mem", write);
	if (fd < 0) return -1;
	ssize_t n = write ? pwrite(fd, byte, 1, (off_t)addr) : pread(fd, byte, 1, (off_t)addr);
	close(fd);
	return n == 1 ? 0 : -1;
}

static uint64_t auxv_entry(pid_t pid)
{
	int fd = door_proc_open(pid, "auxv", false);
	if (fd < 0) return 0;
	Elf64_auxv_t a;
	uint64_t entry = 0;
	while (read(fd, &a, sizeof a) == (ssize_t)sizeof a && a.a_type != AT_NULL)
		if (a.a_type == AT_ENTRY) entry = a.a_un.a_val;
	close(fd);
	return entry;
}

int entry_break_plant(pid_t pid, struct entry_break *b)
{
	b->armed = false;
	b->addr = auxv_entry(pid);
	uint8_t int3 = 0xcc;
	if (!b->addr || mem_rw(pid, b->addr, &b->saved, false) < 0 ||
	    mem_rw(pid, b->addr, &int3, true) < 0)
		return -1;
	b->armed = true;
	return 0;
}

bool entry_break_hit(pid_t tid, struct entry_break *b)
{
	if (!b->armed) return false;
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, tid, NULL, &r) != 0 || r.rip != b->addr + 1) return false;
	b->armed = false;
	r.rip = b->addr;
	return mem_rw(tid, b->addr, &b->saved, true) == 0 &&
	       ptrace(PTRACE_SETREGS, tid, NULL, &r) == 0;
}

void entry_break_remove(pid_t pid, struct entry_break *b)
{
	if (b->armed) mem_rw(pid, b->addr, &b->saved, true);
	b->armed = false;
}
