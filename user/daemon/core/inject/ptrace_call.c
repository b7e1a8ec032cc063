/* Stopping one thread of a process, calling functions on it, putting it back as it was.
 *
 * The return trap: the called function returns to a `syscall` instruction found in the
 * target's code, with the thread resumed by PTRACE_SYSCALL, so the return shows up as a
 * syscall-entry stop at that address with the frame's stack pointer (the function's rax is
 * the would-be syscall number). No signal is involved: a trap by fault (return to 0, int3)
 * raises SIGSEGV/SIGTRAP with force_sig, which resets the program's handler to SIG_DFL when
 * the thread blocks or ignores that signal; a syscall trap changes nothing. The trap's
 * syscall is then skipped (orig_rax = -1) and the thread is brought back to an interrupt
 * stop, the only kind of stop from which the kernel's syscall-restart logic applies to the
 * registers we put back (see docs/inject.md). */
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject_int.h"

#define RED_ZONE 128
#define XSTATE_MAX 16384   /* XSAVE area: 1 KB with AVX, 2.7 KB with AVX-512, ~11 KB with AMX */

struct inject_session {
	pid_t pid, tid;
	int mem_fd;
	uint64_t trap;                   /* address of a syscall instruction */
	struct user_regs_struct stopped; /* the thread's registers at its interrupt stop */
	struct user_regs_struct restore; /* what goes back at detach (see restart_fix) */
	uint8_t xstate[XSTATE_MAX];
	size_t xstate_len;
	int xstate_type;                 /* NT_X86_XSTATE, or NT_PRFPREG (fxsave) */
	uint64_t rseq_cs_addr, rseq_cs;  /* the thread's rseq->rseq_cs and its value */
	bool have_rseq;
	uint64_t sp;                     /* lowest stack byte pushed (inject_push) */
	uint64_t mask_restore;           /* the thread's signal mask while our code ran */
	bool mask_known, mask_changed;
	bool broken;                     /* a call failed: only detach is left */
	bool adopted;                    /* stopped by its tracer, our caller (inject_adopt) */
	long adopt_options;              /* the caller's ptrace options, put back at detach */
	bool gone;                       /* the thread or process died */
};

pid_t inject_session_pid(const struct inject_session *s)
{
	return s ? s->pid : -1;
}

pid_t inject_session_tid(const struct inject_session *s)
{
	return s ? s->tid : -1;
}

/* Stopped in such a call by our interrupt, the thread would see EINTR. -ERESTARTNOHAND
 * makes the kernel do what it would have done without us: restart the call if no handler
 * runs, or return EINTR if a signal's handler runs (that signal did interrupt the call). A
 * restarted call waits its whole timeout again. */
static void restart_fix(struct user_regs_struct *r)
{
	const long ERESTARTNOHAND_ = 514;
	if ((long)r->orig_rax >= 0 && (long)r->rax == -EINTR && inject_returns_bare_eintr(r->orig_rax))
		r->rax = (uint64_t)-ERESTARTNOHAND_;
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static int wait_thread(struct inject_session *s, int *st, char *err, size_t errlen)
{
	for (;;) {
		pid_t r = waitpid(s->tid, st, __WALL);
		if (r < 0 && errno == EINTR) continue;
		if (r < 0) {
			s->gone = true;
			inject_err(err, errlen, "waiting for thread %d: %s", (int)s->tid, strerror(errno));
			return -1;
		}
		if (WIFEXITED(*st) || WIFSIGNALED(*st)) {
			s->gone = true;
			if (WIFEXITED(*st))
				inject_err(err, errlen, "thread %d of pid %d exited (status %d)", (int)s->tid,
				           (int)s->pid, WEXITSTATUS(*st));
			else
				inject_err(err, errlen, "thread %d of pid %d was killed by signal %d",
				           (int)s->tid, (int)s->pid, WTERMSIG(*st));
			return -1;
		}
		if (WIFSTOPPED(*st)) return 0;
	}
}

static int save_state(struct inject_session *s, char *err, size_t errlen);

/* Interrupts the thread and waits for its interrupt stop; signals that reach it before are
 * delivered at once, unchanged (they came before we did). Saves its state. */
static int stop_and_save(struct inject_session *s, int pass_sig, char *err, size_t errlen)
{
	if (ptrace(PTRACE_INTERRUPT, s->tid, NULL, NULL) != 0) {
		inject_err(err, errlen, "PTRACE_INTERRUPT %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	if (pass_sig >= 0 && ptrace(PTRACE_CONT, s->tid, NULL, (void *)(long)pass_sig) != 0) {
		inject_err(err, errlen, "PTRACE_CONT %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	for (;;) {
		int st;
		if (wait_thread(s, &st, err, errlen) != 0) return -1;
		int sig = WSTOPSIG(st), event = (unsigned)st >> 16;
		if (event == PTRACE_EVENT_STOP && sig == SIGTRAP) break;
		if (event == PTRACE_EVENT_STOP && is_stop_signal(sig)) {
			/* group-stop: the process was stopped meanwhile (detach keeps it stopped) */
			inject_err(err, errlen, "pid %d was stopped by signal %d: continue it first",
			           (int)s->pid, sig);
			return -1;
		}
		int deliver = event == 0 && sig != (SIGTRAP | 0x80) ? sig : 0;
		if (ptrace(PTRACE_CONT, s->tid, NULL, (void *)(long)deliver) != 0) {
			inject_err(err, errlen, "PTRACE_CONT %d: %s", (int)s->tid, strerror(errno));
			return -1;
		}
	}
	if (ptrace(PTRACE_GETREGS, s->tid, NULL, &s->stopped) != 0) {
		inject_err(err, errlen, "PTRACE_GETREGS %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	s->restore = s->stopped;
	restart_fix(&s->restore);
	/* At once: should we die from here on, the kernel lets the thread go with these
	 * registers, and a bare EINTR must already be a restart. */
	if (s->restore.rax != s->stopped.rax && ptrace(PTRACE_SETREGS, s->tid, NULL, &s->restore) != 0) {
		inject_err(err, errlen, "PTRACE_SETREGS %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	return save_state(s, err, errlen);
}

/* The FP/SSE/AVX state, the rseq critical section and the stack pointer of the stopped
 * thread (registers read already). */
static int save_state(struct inject_session *s, char *err, size_t errlen)
{
	struct iovec iov = { s->xstate, sizeof(s->xstate) };
	s->xstate_type = NT_X86_XSTATE;
	if (ptrace(PTRACE_GETREGSET, s->tid, (void *)(long)NT_X86_XSTATE, &iov) != 0) {
		iov.iov_len = sizeof(s->xstate);
		s->xstate_type = NT_PRFPREG;
		if (ptrace(PTRACE_GETREGSET, s->tid, (void *)(long)NT_PRFPREG, &iov) != 0) {
			inject_err(err, errlen, "cannot save the FP/SSE state of %d: %s", (int)s->tid,
			           strerror(errno));
			return -1;
		}
	}
	s->xstate_len = iov.iov_len;
	/* rseq: the kernel clears rseq->rseq_cs when it sees the thread run outside the critical
	 * section (our call); put it back so a section we interrupted still aborts if preempted */
	struct __ptrace_rseq_configuration rc;
	s->have_rseq = false;
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, s->tid, (void *)sizeof(rc), &rc) > 0 &&
	    rc.rseq_abi_pointer) {
		s->rseq_cs_addr = rc.rseq_abi_pointer + 8;
		s->have_rseq = inject_mem_read(s->mem_fd, s->rseq_cs_addr, &s->rseq_cs, 8) == 0;
	}
	s->sp = s->stopped.rsp - RED_ZONE;
	return 0;
}

/* Seizes thread tid of s->pid and brings it to an interrupt stop, its state saved (a bare
 * EINTR already made a restart in its registers). A thread with a seccomp filter of its own
 * (read again once it is stopped: it cannot install one after that) is let go. 0, or -1 and
 * why; the thread is not ours then. */
static int stop_thread(struct inject_session *s, pid_t tid, char *why, size_t whylen)
{
	s->tid = tid;
	s->gone = false;
	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD) != 0) {
		inject_err(why, whylen, "cannot ptrace thread %d of pid %d: %s", (int)tid, (int)s->pid,
		           strerror(errno));
		return -1;
	}
	if (stop_and_save(s, -1, why, whylen) != 0) {
		if (!s->gone) ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return -1;
	}
	if (inject_thread_seccomp(s->pid, tid) != 0) {
		inject_err(why, whylen, "thread %d has a seccomp filter of its own", (int)tid);
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return -1;
	}
	return 0;
}

/* Stops the first candidate thread of s->pid (inject_thread_candidates) that stop_thread
 * takes. */
static int stop_some_thread(struct inject_session *s, char *err, size_t errlen)
{
	pid_t cand[INJECT_MAX_CANDIDATES];
	int confined, n = inject_thread_candidates(s->pid, cand, NULL, INJECT_MAX_CANDIDATES, &confined);
	char why[512] = "";
	for (int i = 0; i < n; i++) {
		if (stop_thread(s, cand[i], why, sizeof why) == 0) return 0;
		if (kill(s->pid, 0) != 0) break;
	}
	if (why[0]) inject_err(err, errlen, "%s", why);
	else if (confined)
		inject_err(err, errlen, "pid %d: every thread is confined by a seccomp filter of its "
		           "own (%d): the library's system calls could kill it", (int)s->pid, confined);
	else inject_err(err, errlen, "pid %d has no thread to stop", (int)s->pid);
	return -1;
}

int inject_attach(pid_t pid, struct inject_session **out, char *err, size_t errlen)
{
	*out = NULL;
	if (inject_check_target(pid, err, errlen) != 0) return -1;
	struct inject_session *s = calloc(1, sizeof(*s));
	if (!s) {
		inject_err(err, errlen, "out of memory");
		return -1;
	}
	s->pid = pid;
	s->mem_fd = -1;
	if (inject_find_syscall_insn(pid, &s->trap, err, errlen) != 0) goto fail;
	s->mem_fd = inject_mem_open(pid, true);
	if (s->mem_fd < 0) {
		inject_err(err, errlen, "cannot open /proc/%d/mem: %s", (int)pid, strerror(errno));
		goto fail;
	}
	if (stop_some_thread(s, err, errlen) != 0) goto fail;
	*out = s;
	return 0;
fail:
	if (s->mem_fd >= 0) close(s->mem_fd);
	free(s);
	return -1;
}

int inject_adopt(pid_t pid, pid_t tid, long ptrace_options, struct inject_session **out,
                 char *err, size_t errlen)
{
	*out = NULL;
	struct inject_session *s = calloc(1, sizeof(*s));
	if (!s) {
		inject_err(err, errlen, "out of memory");
		return -1;
	}
	s->pid = pid;
	s->tid = tid;
	s->adopted = true;
	s->adopt_options = ptrace_options;
	s->mem_fd = inject_mem_open(pid, true);
	if (s->mem_fd < 0) {
		inject_err(err, errlen, "cannot open /proc/%d/mem: %s", (int)pid, strerror(errno));
		goto fail;
	}
	if (inject_find_syscall_insn(pid, &s->trap, err, errlen) != 0) goto fail;
	/* the return trap is a syscall-entry stop: tell it from a SIGTRAP */
	if (ptrace(PTRACE_SETOPTIONS, tid, NULL, (void *)(ptrace_options | PTRACE_O_TRACESYSGOOD)) != 0 ||
	    ptrace(PTRACE_GETREGS, tid, NULL, &s->stopped) != 0) {
		inject_err(err, errlen, "cannot take over the stop of thread %d: %s", (int)tid,
		           strerror(errno));
		goto fail;
	}
	s->restore = s->stopped; /* not in a system call: nothing to restart */
	if (save_state(s, err, errlen) != 0) goto fail;
	*out = s;
	return 0;
fail:
	if (s->mem_fd >= 0) close(s->mem_fd);
	free(s);
	return -1;
}

int inject_push(struct inject_session *s, const void *data, size_t len, uint64_t *addr,
                char *err, size_t errlen)
{
	if (s->broken || len > (1 << 20)) {
		inject_err(err, errlen, s->broken ? "session failed before" : "too much to push");
		return -1;
	}
	uint64_t at = (s->sp - len) & ~(uint64_t)15;
	if (inject_mem_write(s->mem_fd, at, data, len) != 0) {
		inject_err(err, errlen, "cannot write the stack of %d at 0x%llx: %s", (int)s->tid,
		           (unsigned long long)at, strerror(errno));
		return -1;
	}
	s->sp = at;
	*addr = at;
	return 0;
}

/* A signal raised by the injected code's own fault (not sent by someone). */
static bool is_fault(int sig, const siginfo_t *si)
{
	return (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
	        sig == SIGTRAP || sig == SIGSYS) && si->si_code > 0;
}

static int get_mask(struct inject_session *s, uint64_t *mask)
{
	return ptrace(PTRACE_GETSIGMASK, s->tid, (void *)sizeof(*mask), mask) == 0 ? 0 : -1;
}

/* A signal for our thread while it runs injected code: it must not run a handler on top of
 * our call (the handler could longjmp out of it). Blocking it before resuming makes the
 * kernel queue it again, siginfo and all (ptrace_signal: "If the (new) signal is now
 * blocked, requeue it"); the mask goes back at detach, then it is delivered. */
static int defer_signal(struct inject_session *s, int sig, char *err, size_t errlen)
{
	uint64_t mask;
	if (get_mask(s, &mask) != 0) {
		inject_err(err, errlen, "PTRACE_GETSIGMASK %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	if (!s->mask_known) s->mask_restore = mask, s->mask_known = true;
	mask |= 1ULL << (sig - 1);
	if (ptrace(PTRACE_SETSIGMASK, s->tid, (void *)sizeof(mask), &mask) != 0) {
		inject_err(err, errlen, "PTRACE_SETSIGMASK %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	s->mask_changed = true;
	return 0;
}

/* Sets up the call on the stopped thread: returns the frame's stack pointer. */
static int setup_call(struct inject_session *s, uint64_t func, const uint64_t *args, int nargs,
                      uint64_t *frame, char *err, size_t errlen)
{
	/* at the function's entry (rsp + 8) is 16-byte aligned, as after a call */
	uint64_t sp = ((s->sp - 64) & ~(uint64_t)15) - 8;
	if (inject_mem_write(s->mem_fd, sp, &s->trap, 8) != 0) {
		inject_err(err, errlen, "cannot write the stack of %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	struct user_regs_struct r = s->stopped;
	unsigned long long *argregs[INJECT_MAX_ARGS] = { &r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9 };
	for (int i = 0; i < nargs; i++) *argregs[i] = args[i];
	r.rip = func;
	r.rsp = sp;
	r.rax = 0;             /* no vector registers used by a variadic callee */
	r.orig_rax = -1;       /* not in a syscall: the kernel must not "restart" anything here */
	r.eflags &= ~0x500ULL; /* DF clear (ABI), TF clear */
	if (ptrace(PTRACE_SETREGS, s->tid, NULL, &r) != 0) {
		inject_err(err, errlen, "PTRACE_SETREGS %d: %s", (int)s->tid, strerror(errno));
		return -1;
	}
	*frame = sp;
	return 0;
}

int inject_session_call(struct inject_session *s, uint64_t func, const uint64_t *args, int nargs,
                        uint64_t *ret, char *err, size_t errlen)
{
	if (s->broken) {
		inject_err(err, errlen, "an earlier call of this session failed");
		return -1;
	}
	if (nargs < 0 || nargs > INJECT_MAX_ARGS) {
		inject_err(err, errlen, "%d arguments: at most %d", nargs, INJECT_MAX_ARGS);
		return -1;
	}
	uint64_t frame;
	int retries = 0;
again:
	if (setup_call(s, func, args, nargs, &frame, err, errlen) != 0) goto broken;
	bool ran = false, returned = false;
	int req = PTRACE_SYSCALL, sig = 0;
	for (;;) {
		if (ptrace(req, s->tid, NULL, (void *)(long)sig) != 0) {
			inject_err(err, errlen, "resuming %d: %s", (int)s->tid, strerror(errno));
			goto broken;
		}
		sig = 0;
		int st;
		if (wait_thread(s, &st, err, errlen) != 0) goto broken;
		int stopsig = WSTOPSIG(st), event = (unsigned)st >> 16;
		struct user_regs_struct r;
		if (stopsig == (SIGTRAP | 0x80)) {
			struct __ptrace_syscall_info info;
			if (ptrace(PTRACE_GET_SYSCALL_INFO, s->tid, (void *)sizeof(info), &info) <= 0 ||
			    ptrace(PTRACE_GETREGS, s->tid, NULL, &r) != 0) {
				inject_err(err, errlen, "reading syscall stop of %d: %s", (int)s->tid,
				           strerror(errno));
				goto broken;
			}
			if (info.op == PTRACE_SYSCALL_INFO_ENTRY && r.rip == s->trap + 2 &&
			    r.rsp == frame + 8) {
				/* returned: rax became the syscall number; skip it, stop at once */
				if (ret) *ret = r.orig_rax;
				r.orig_rax = -1;
				if (ptrace(PTRACE_SETREGS, s->tid, NULL, &r) != 0 ||
				    ptrace(PTRACE_INTERRUPT, s->tid, NULL, NULL) != 0) {
					inject_err(err, errlen, "stopping %d after the call: %s", (int)s->tid,
					           strerror(errno));
					goto broken;
				}
				returned = true;
				req = PTRACE_CONT;
				continue;
			}
			/* the call's own system calls; the mask now is the thread's plain one */
			if (!s->mask_known && get_mask(s, &s->mask_restore) == 0) s->mask_known = true;
			ran = true;
			continue;
		}
		if (event == PTRACE_EVENT_STOP) {
			if (stopsig == SIGTRAP && returned) break;
			/* group-stop: our call goes on; detach puts the thread back into the stop */
			continue;
		}
		if (event) continue;
		/* signal-delivery-stop */
		siginfo_t si;
		if (ptrace(PTRACE_GETSIGINFO, s->tid, NULL, &si) != 0 ||
		    ptrace(PTRACE_GETREGS, s->tid, NULL, &r) != 0) {
			inject_err(err, errlen, "reading signal stop of %d: %s", (int)s->tid,
			           strerror(errno));
			goto broken;
		}
		if (is_fault(stopsig, &si)) {
			inject_err(err, errlen, "the call of 0x%llx faulted: signal %d (%s) at rip 0x%llx, "
			           "address %p; the thread is put back as it was", (unsigned long long)func,
			           stopsig, strsignal(stopsig), (unsigned long long)r.rip, si.si_addr);
			goto broken;
		}
		if (!ran && !returned && r.rip == func && retries++ < 20) {
			/* The signal came with our interrupt, before the call ran: undo, let it be
			 * delivered as it would have been (same registers, same syscall-restart rules,
			 * a ppoll/pselect temporary mask still in place), stop again and start over. */
			if (ptrace(PTRACE_SETREGS, s->tid, NULL, &s->restore) != 0 ||
			    stop_and_save(s, stopsig, err, errlen) != 0)
				goto broken;
			goto again;
		}
		if (is_stop_signal(stopsig) || stopsig == SIGKILL) {
			sig = stopsig; /* cannot be blocked: it stops the process, our call goes on */
			continue;
		}
		if (defer_signal(s, stopsig, err, errlen) != 0) goto broken;
		sig = stopsig; /* blocked now: the kernel queues it again */
	}
	return 0;
broken:
	s->broken = true;
	return -1;
}

int inject_detach(struct inject_session *s, char *err, size_t errlen)
{
	if (!s) return 0;
	int rc = 0;
	if (!s->gone) {
		struct iovec iov = { s->xstate, s->xstate_len };
		const char *what = NULL;
		if (ptrace(PTRACE_SETREGS, s->tid, NULL, &s->restore) != 0) what = "registers";
		else if (ptrace(PTRACE_SETREGSET, s->tid, (void *)(long)s->xstate_type, &iov) != 0)
			what = "FP/SSE/AVX state";
		else if (s->mask_changed &&
		         ptrace(PTRACE_SETSIGMASK, s->tid, (void *)sizeof(s->mask_restore),
		                &s->mask_restore) != 0)
			what = "signal mask";
		else if (s->have_rseq && inject_mem_write(s->mem_fd, s->rseq_cs_addr, &s->rseq_cs, 8) != 0)
			what = "rseq critical section";
		if (what) {
			inject_err(err, errlen, "cannot restore the %s of thread %d: %s", what, (int)s->tid,
			           strerror(errno));
			rc = -1;
		}
		/* adopted: the caller resumes the thread (it stays in its interrupt stop) */
		if (s->adopted) {
			if (ptrace(PTRACE_SETOPTIONS, s->tid, NULL, (void *)s->adopt_options) != 0 && rc == 0) {
				inject_err(err, errlen, "PTRACE_SETOPTIONS %d: %s", (int)s->tid, strerror(errno));
				rc = -1;
			}
		/* from an interrupt stop the kernel goes on in get_signal: deferred signals are
		 * delivered now, then the interrupted syscall restarts per the restored registers */
		} else if (ptrace(PTRACE_DETACH, s->tid, NULL, NULL) != 0 && rc == 0) {
			inject_err(err, errlen, "PTRACE_DETACH %d: %s", (int)s->tid, strerror(errno));
			rc = -1;
		}
	}
	if (s->mem_fd >= 0) close(s->mem_fd);
	free(s);
	return rc;
}

/* ---- sending a thread into a stub that needs no tracer (agent.c) ---- */

/* Where a thread stopped by our interrupt resumes when no handler runs (the kernel's restart
 * rules, arch_do_signal_or_restart, applied here: with orig_rax = -1 the kernel applies none,
 * and the stub returns to *rip with *rax). r: the registers with restart_fix applied. */
static void resume_point(const struct user_regs_struct *r, uint64_t *rip, uint64_t *rax)
{
	*rip = r->rip;
	*rax = r->rax;
	if ((long)r->orig_rax < 0) return;
	switch ((long)r->rax) {
	case -512: case -513: case -514: /* -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND */
		*rax = r->orig_rax;
		*rip = r->rip - 2;       /* the syscall instruction again */
		break;
	case -516:                       /* -ERESTART_RESTARTBLOCK: its state is the kernel's */
		*rax = SYS_restart_syscall;
		*rip = r->rip - 2;
		break;
	}
}

/* Is the thread inside an rseq critical section (its rseq_cs names a range holding rip)?
 * Returning into one from elsewhere would run the rest of it unprotected. */
static bool in_rseq_section(const struct inject_session *s)
{
	if (!s->have_rseq || !s->rseq_cs) return false;
	struct { uint32_t version, flags; uint64_t start_ip, post_commit_offset, abort_ip; } cs;
	if (inject_mem_read(s->mem_fd, s->rseq_cs, &cs, sizeof cs) != 0) return true;
	return s->stopped.rip >= cs.start_ip && s->stopped.rip - cs.start_ip < cs.post_commit_offset;
}

static long ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int inject_redirect(pid_t pid, uint64_t entry, inject_safe_fn safe, void *safe_ctx,
                    inject_before_fn before, void *before_ctx, long wait_ms, pid_t *tid_out,
                    char *err, size_t errlen)
{
	struct inject_session *s = calloc(1, sizeof(*s));
	if (!s) {
		inject_err(err, errlen, "out of memory");
		return -1;
	}
	s->pid = pid;
	s->mem_fd = inject_mem_open(pid, true);
	if (s->mem_fd < 0) {
		inject_err(err, errlen, "cannot open /proc/%d/mem: %s", (int)pid, strerror(errno));
		free(s);
		return -1;
	}
	char why[512] = "";
	long deadline = ms_now() + wait_ms;
	int unsafe = 0, rc = -1;
	for (int round = 0;; round++) {
		pid_t cand[INJECT_MAX_CANDIDATES];
		int rank[INJECT_MAX_CANDIDATES], confined;
		int n = inject_thread_candidates(pid, cand, rank, INJECT_MAX_CANDIDATES, &confined);
		if (n == 0 && kill(pid, 0) != 0) {
			inject_err(err, errlen, "pid %d is gone", (int)pid);
			goto out;
		}
		/* A thread in a call that returns a bare EINTR when woken is stopped only when no
		 * other one would do for half the time: between its stop and our first write of
		 * its registers, our death would let the EINTR through. */
		bool others_only = ms_now() < deadline - wait_ms / 2 && rank[0] < INJECT_RANK_BARE_EINTR;
		for (int i = 0; i < n; i++) {
			if (others_only && rank[i] >= INJECT_RANK_BARE_EINTR) continue;
			if (stop_thread(s, cand[i], why, sizeof why) != 0) continue;
			bool ok = !in_rseq_section(s);
			if (!ok)
				inject_err(why, sizeof why, "thread %d is in an rseq critical section", (int)s->tid);
			else if (!inject_stack_room(pid, s->tid, s->stopped.rsp, why, sizeof why))
				ok = false, unsafe++;
			else if (safe && !safe(safe_ctx, pid, s->tid, &s->stopped, why, sizeof why))
				ok = false, unsafe++;
			/* nothing of it changed but the restart already written: let it go as it is */
			if (!ok) {
				ptrace(PTRACE_DETACH, s->tid, NULL, NULL);
				continue;
			}
			uint64_t rip, rax;
			resume_point(&s->restore, &rip, &rax);
			if (before(before_ctx, rip, &s->stopped, err, errlen) != 0) {
				ptrace(PTRACE_DETACH, s->tid, NULL, NULL);
				goto out;
			}
			/* From here on the thread needs nothing from us: if we die now, the kernel lets
			 * it go into the stub, which puts everything back itself. */
			struct user_regs_struct r = s->stopped;
			r.rip = entry;
			r.rax = rax;
			r.orig_rax = -1;
			if (ptrace(PTRACE_SETREGS, s->tid, NULL, &r) != 0) {
				inject_err(err, errlen, "PTRACE_SETREGS %d: %s", (int)s->tid, strerror(errno));
				ptrace(PTRACE_DETACH, s->tid, NULL, NULL);
				goto out;
			}
			if (ptrace(PTRACE_DETACH, s->tid, NULL, NULL) != 0) {
				/* still ours, stopped: it goes into the stub when we exit */
				inject_err(err, errlen, "PTRACE_DETACH %d after redirecting it: %s",
				           (int)s->tid, strerror(errno));
				goto out;
			}
			if (tid_out) *tid_out = s->tid;
			rc = 0;
			goto out;
		}
		if (ms_now() >= deadline) {
			if (confined && n == 0)
				inject_err(err, errlen, "pid %d: every thread is confined by a seccomp filter of "
				           "its own", (int)pid);
			else
				inject_err(err, errlen, "no thread of pid %d was at a safe moment within %ld ms "
				           "(%d looked at; last: %s)", (int)pid, wait_ms, unsafe,
				           why[0] ? why : "none");
			goto out;
		}
		usleep(round < 10 ? 1000 : 10000);
	}
out:
	close(s->mem_fd);
	free(s);
	return rc;
}
