/* Holding traced processes with ptrace (see hold.h). */
#include "hold.h"
#include "door/door.h"
#include "common/deadline.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/msg.h"
#include "entry_break.h"
#include "record_queue.h"

/* How long a process is held at most when nobody releases it (a bug of ours must not stop the
 * target for good). */
#define HOLD_MAX_MS 5000
/* Interrupts the hold thread's waitpid for hold_detach (no SA_RESTART). */
#define WAKE_SIGNAL (SIGRTMIN + 4)

struct tracee {
	pid_t tid;
	bool fresh;      /* auto-attached, its first stop not seen yet */
	bool thread;     /* a thread of another tracee (not a process leader) */
	bool first_exec; /* a spawned child before its own exec (CMD) */
	struct entry_break brk; /* at CMD's entry point, for the entry function */
};

struct exit_hook {
	pid_t pid;
	void (*fn)(void *ctx);
	void *ctx;
};

struct hold {
	pid_t pid;
	struct hold_opts opts;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;              /* 0 starting, 1 holding, -1 seize failed, 2 done */
	char seize_err[256];
	bool exited;            /* the first process exited: wstatus */
	int wstatus;
	atomic_bool detach;     /* hold_detach asked */
	/* the process held now */
	bool pending, released;
	struct hold_event ev;
	double held_ms, max_held_ms;
	unsigned holds;
	/* the tracees: the hold thread's only */
	struct tracee *t;
	int nt, cap;
	/* the exec functions and the exit gate, set once before the process runs (exec_lock) */
	pthread_mutex_t exec_lock;
	void (*exec_fn)(void *ctx, pid_t pid, uint64_t stop_ns);
	void (*after_exec_fn)(void *ctx, pid_t pid);
	void *exec_ctx;
	void (*entry_fn)(void *ctx, pid_t pid, long ptrace_options);
	void *entry_ctx;
	bool (*exit_busy)(void *ctx, pid_t pid);
	void *exit_busy_ctx;
	/* exit hooks, under hook_lock; running_ctx: the one running now (on the hold thread,
	 * without the lock: a hook may wait long), hook_done signalled when it returns */
	pthread_mutex_t hook_lock;
	pthread_cond_t hook_done;
	void *running_ctx;
	struct exit_hook *hooks;
	int nhooks, hooks_cap;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_state(struct hold *h, int state)
{
	pthread_mutex_lock(&h->lock);
	h->state = state;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

static struct tracee *tracee_find(struct hold *h, pid_t tid)
{
	for (int i = 0; i < h->nt; i++)
		if (h->t[i].tid == tid) return &h->t[i];
	return NULL;
}

static struct tracee *tracee_add(struct hold *h, pid_t tid)
{
	struct tracee *t = tracee_find(h, tid);
	if (t) return t;
	if (h->nt == h->cap) {
		int cap = h->cap ? 2 * h->cap : 16;
		struct tracee *grown = realloc(h->t, (size_t)cap * sizeof *grown);
		if (!grown) return NULL;
		h->t = grown;
		h->cap = cap;
	}
	t = &h->t[h->nt++];
	*t = (struct tracee){.tid = tid};
	return t;
}

static void tracee_remove(struct hold *h, pid_t tid)
{
	struct tracee *t = tracee_find(h, tid);
	if (t) *t = h->t[--h->nt];
}

/* The thread group of tid, from /proc (0 if it is gone). */
static pid_t tgid_of(pid_t tid)
{
	char line[128];
	FILE *f = door_proc_fopen(tid, "status");
	if (!f) return 0;
	pid_t tgid = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1) break;
	fclose(f);
	return tgid;
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static long seize_options(const struct hold_opts *o)
{
	long opt = 0;
	if (o->exit) opt |= PTRACE_O_TRACEEXIT;
	if (o->exec) opt |= PTRACE_O_TRACEEXEC;
	/* threads too: any thread may exec or fork */
	if (o->exec || o->forks) opt |= PTRACE_O_TRACECLONE;
	if (o->forks) opt |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
	return opt;
}

/* -p: seizes every thread of the running process; threads started meanwhile are auto-attached
 * (TRACECLONE) or found by the next scan. */
static int seize_running(struct hold *h, long opt)
{
	for (int round = 0; round < 8; round++) {
		DIR *d = door_proc_opendir(h->pid, "task");
		if (!d) return -errno;
		int added = 0;
		struct dirent *e;
		while ((e = readdir(d))) {
			pid_t tid = (pid_t)atoi(e->d_name);
			if (tid <= 0 || tracee_find(h, tid)) continue;
			if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)opt) < 0) {
				if (errno == ESRCH) continue; /* the thread exited */
				int err = errno;
				closedir(d);
				return -err;
			}
			struct tracee *t = tracee_add(h, tid);
			if (!t) {
				closedir(d);
				return -ENOMEM;
			}
			t->thread = tid != h->pid;
			added++;
		}
		closedir(d);
		if (!added) return 0;
	}
	return 0;
}

static void warn_if_setuid(pid_t pid)
{
	char path[64], exe[4096];
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	struct stat st;
	if (stat(path, &st) < 0 || !(st.st_mode & (S_ISUID | S_ISGID))) return;
	ssize_t n = readlink(path, exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	msg_warn("PID %d runs %s, a set-%cid program, under memtraced's ptrace: the kernel grants its "
		 "set-%cid only to a privileged tracer, and it shows memtraced as its TracerPid",
		 (int)pid, exe[0] ? exe : "?", st.st_mode & S_ISUID ? 'u' : 'g',
		 st.st_mode & S_ISUID ? 'u' : 'g');
}

/* Holds pid until the caller releases it (or HOLD_MAX_MS, or hold_detach). */
static void hold_wait(struct hold *h, pid_t pid, enum hold_kind kind)
{
	uint64_t since = mono_ns();
	pthread_mutex_lock(&h->lock);
	h->ev = (struct hold_event){.pid = pid, .kind = kind, .since_ns = since};
	h->pending = true;
	h->released = false;
	pthread_mutex_unlock(&h->lock);
	rq_kick_all(); /* the main loop waits on record queues: it looks now */
	struct timespec until = deadline_after_ms(HOLD_MAX_MS);
	bool timed_out = false;
	pthread_mutex_lock(&h->lock);
	while (!h->released && !atomic_load(&h->detach))
		if (pthread_cond_timedwait(&h->cond, &h->lock, &until) == ETIMEDOUT) {
			timed_out = !h->released;
			break;
		}
	h->pending = false;
	double ms = (mono_ns() - since) / 1e6;
	h->held_ms += ms;
	if (ms > h->max_held_ms) h->max_held_ms = ms;
	h->holds++;
	pthread_mutex_unlock(&h->lock);
	if (timed_out) msg_warn("PID %d: held %d ms at its %s without its probes: let go", (int)pid,
				HOLD_MAX_MS, kind == HOLD_EXEC ? "exec" : "start");
}

static void run_exit_hook(struct hold *h, pid_t pid)
{
	rq_kick_all();
	/* A program prepared at its exec and not taken over yet: its session comes soon. */
	for (int i = 0; i < 2000; i++) {
		pthread_mutex_lock(&h->exec_lock);
		bool busy = h->exit_busy && h->exit_busy(h->exit_busy_ctx, pid);
		pthread_mutex_unlock(&h->exec_lock);
		if (!busy || atomic_load(&h->detach)) break;
		usleep(1000);
	}
	pthread_mutex_lock(&h->hook_lock);
	struct exit_hook hook = {0};
	for (int i = 0; i < h->nhooks; i++)
		if (h->hooks[i].pid == pid) hook = h->hooks[i];
	h->running_ctx = hook.ctx;
	pthread_mutex_unlock(&h->hook_lock);
	if (hook.fn) hook.fn(hook.ctx);
	pthread_mutex_lock(&h->hook_lock);
	h->running_ctx = NULL;
	pthread_cond_broadcast(&h->hook_done);
	pthread_mutex_unlock(&h->hook_lock);
}

/* The exec function, if set: true when it ran (the process goes on now). */
static bool run_exec_fn(struct hold *h, pid_t pid)
{
	uint64_t since = mono_ns();
	pthread_mutex_lock(&h->exec_lock);
	bool ran = h->exec_fn != NULL;
	if (ran) h->exec_fn(h->exec_ctx, pid, since);
	pthread_mutex_unlock(&h->exec_lock);
	if (!ran) return false;
	double ms = (mono_ns() - since) / 1e6;
	pthread_mutex_lock(&h->lock);
	h->held_ms += ms;
	if (ms > h->max_held_ms) h->max_held_ms = ms;
	h->holds++;
	pthread_mutex_unlock(&h->lock);
	rq_kick_all(); /* the main loop takes the new program over now */
	return true;
}

/* One ptrace-stop of a tracee: answer it at once (or after the hold) so the program goes on. */
static void on_stop(struct hold *h, pid_t tid, int st)
{
	int sig = WSTOPSIG(st), event = (unsigned)st >> 16;
	struct tracee *t = tracee_find(h, tid);
	if (!t) { /* auto-attached, its parent's event not seen yet */
		t = tracee_add(h, tid);
		if (t) {
			t->fresh = true;
			t->thread = tgid_of(tid) != tid;
		}
	}
	unsigned long msg = 0;
	switch (event) {
	case PTRACE_EVENT_EXIT:
		if (!t || !t->thread) run_exit_hook(h, tid);
		break;
	case PTRACE_EVENT_EXEC:
		/* A thread that exec'd took the leader's id; the old thread id is gone. */
		if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg) == 0 && (pid_t)msg != tid)
			tracee_remove(h, (pid_t)msg);
		t = tracee_find(h, tid);
		if (t) t->thread = false;
		if (t && t->first_exec) { /* CMD itself */
			t->first_exec = false;
			pthread_mutex_lock(&h->exec_lock);
			bool want_entry = h->entry_fn != NULL;
			pthread_mutex_unlock(&h->exec_lock);
			if (want_entry && entry_break_plant(tid, &t->brk) < 0)
				msg_warn("PID %d: cannot stop it at its entry point", (int)tid);
		} else if (h->opts.exec) {
			warn_if_setuid(tid);
			if (run_exec_fn(h, tid)) {
				ptrace(PTRACE_CONT, tid, NULL, NULL);
				pthread_mutex_lock(&h->exec_lock);
				if (h->after_exec_fn) h->after_exec_fn(h->exec_ctx, tid);
				pthread_mutex_unlock(&h->exec_lock);
				return;
			}
			hold_wait(h, tid, HOLD_EXEC);
		}
		break;
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
	case PTRACE_EVENT_CLONE:
		if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg) == 0 && !tracee_find(h, (pid_t)msg)) {
			struct tracee *c = tracee_add(h, (pid_t)msg);
			if (c) {
				c->fresh = true;
				c->thread = event == PTRACE_EVENT_CLONE && tgid_of((pid_t)msg) != (pid_t)msg;
			}
		}
		break;
	case PTRACE_EVENT_STOP:
		if (t && t->fresh) {
			t->fresh = false;
			if (!t->thread && h->opts.forks) hold_wait(h, tid, HOLD_START);
		} else if (is_stop_signal(sig)) {
			/* group-stop: stay stopped as without us (until SIGCONT) */
			ptrace(PTRACE_LISTEN, tid, NULL, NULL);
			return;
		}
		break;
	case 0:
		if (sig == SIGTRAP && t && entry_break_hit(tid, &t->brk)) {
			/* our breakpoint at CMD's entry: not the program's SIGTRAP */
			pthread_mutex_lock(&h->exec_lock);
			if (h->entry_fn) h->entry_fn(h->entry_ctx, tid, seize_options(&h->opts));
			pthread_mutex_unlock(&h->exec_lock);
			ptrace(PTRACE_CONT, tid, NULL, NULL);
			return;
		}
		/* signal-delivery-stop: deliver it unchanged */
		ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
		return;
	}
	ptrace(PTRACE_CONT, tid, NULL, NULL);
}

/* hold_detach: every tracee is stopped (PTRACE_INTERRUPT) and detached; a signal that was
 * about to be delivered is delivered by the detach. */
static void detach_all(struct hold *h)
{
	for (int i = 0; i < h->nt; i++) entry_break_remove(h->t[i].tid, &h->t[i].brk);
	for (int i = 0; i < h->nt; i++) ptrace(PTRACE_INTERRUPT, h->t[i].tid, NULL, NULL);
	uint64_t deadline = mono_ns() + 2000000000ull;
	while (h->nt > 0 && mono_ns() < deadline) {
		int st;
		pid_t r = waitpid(-1, &st, __WALL | __WNOTHREAD | WNOHANG);
		if (r < 0 && errno == EINTR) continue;
		if (r < 0) break;
		if (r == 0) {
			usleep(1000);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (r == h->pid) h->exited = true, h->wstatus = st;
			tracee_remove(h, r);
			continue;
		}
		int event = (unsigned)st >> 16, sig = WSTOPSIG(st);
		if (event == PTRACE_EVENT_EXIT) run_exit_hook(h, r);
		ptrace(PTRACE_DETACH, r, NULL, (void *)(long)(event == 0 ? sig : 0));
		tracee_remove(h, r);
	}
}

static void on_wake(int sig) { (void)sig; }

static void *hold_main(void *arg)
{
	struct hold *h = arg;
	long opt = seize_options(&h->opts);
	if (h->opts.running) {
		int e = seize_running(h, opt);
		if (e < 0) {
			snprintf(h->seize_err, sizeof h->seize_err, "%s", strerror(-e));
			for (int i = 0; i < h->nt; i++) ptrace(PTRACE_DETACH, h->t[i].tid, NULL, NULL);
			set_state(h, -1);
			return NULL;
		}
	} else {
		/* SEIZE (unlike ATTACH) neither stops the child nor makes its exec send a SIGTRAP */
		struct tracee *t = tracee_add(h, h->pid);
		if (!t || ptrace(PTRACE_SEIZE, h->pid, NULL, (void *)opt) < 0) {
			snprintf(h->seize_err, sizeof h->seize_err, "%s", strerror(t ? errno : ENOMEM));
			set_state(h, -1);
			return NULL;
		}
		t->first_exec = true;
	}
	sigset_t wake;
	sigemptyset(&wake);
	sigaddset(&wake, WAKE_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
	set_state(h, 1);
	while (!atomic_load(&h->detach)) {
		int st;
		/* __WNOTHREAD: only our own tracees (another hold's thread has its own) */
		pid_t r = waitpid(-1, &st, __WALL | __WNOTHREAD);
		if (r < 0) {
			if (errno == EINTR) continue;
			break; /* ECHILD: nothing traced any more */
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			tracee_remove(h, r);
			if (r == h->pid && !h->opts.running) {
				pthread_mutex_lock(&h->lock);
				h->exited = true;
				h->wstatus = st;
				pthread_cond_broadcast(&h->cond);
				pthread_mutex_unlock(&h->lock);
			}
			continue;
		}
		if (WIFSTOPPED(st)) on_stop(h, r, st);
	}
	if (atomic_load(&h->detach)) detach_all(h);
	pthread_mutex_lock(&h->lock);
	if (!h->opts.running && !h->exited) { /* cannot happen: the child is ours; say "exited 1" */
		h->exited = true;
		h->wstatus = 1 << 8;
	}
	h->state = 2;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

struct hold *hold_start(pid_t pid, const struct hold_opts *o, char *err, size_t errlen)
{
	struct hold *h = calloc(1, sizeof *h);
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->pid = pid;
	h->opts = *o;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->hook_lock, NULL);
	pthread_mutex_init(&h->exec_lock, NULL);
	pthread_cond_init(&h->hook_done, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	struct sigaction sa = {.sa_handler = on_wake}; /* no SA_RESTART: waitpid returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(WAKE_SIGNAL, &sa, NULL);
	/* signals are for the main thread (its handlers only set flags it polls) */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int e = pthread_create(&h->thread, NULL, hold_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		snprintf(err, errlen, "cannot start the thread holding PID %d: %s", (int)pid, strerror(e));
		free(h);
		return NULL;
	}
	pthread_mutex_lock(&h->lock);
	while (h->state == 0) pthread_cond_wait(&h->cond, &h->lock);
	int state = h->state;
	pthread_mutex_unlock(&h->lock);
	if (state < 0) {
		snprintf(err, errlen, "cannot hold PID %d (ptrace): %s", (int)pid, h->seize_err);
		pthread_join(h->thread, NULL);
		free(h->t);
		free(h);
		return NULL;
	}
	return h;
}

void hold_set_exit_hook(struct hold *h, pid_t pid, void (*fn)(void *ctx), void *ctx)
{
	if (!h) return;
	pthread_mutex_lock(&h->hook_lock);
	int i = 0;
	while (i < h->nhooks && h->hooks[i].pid != pid) i++;
	if (i == h->nhooks && h->nhooks == h->hooks_cap) {
		int cap = h->hooks_cap ? 2 * h->hooks_cap : 8;
		struct exit_hook *grown = realloc(h->hooks, (size_t)cap * sizeof *grown);
		if (!grown) {
			pthread_mutex_unlock(&h->hook_lock);
			return; /* no hold at the exit: a short program may miss its last stacks */
		}
		h->hooks = grown;
		h->hooks_cap = cap;
	}
	if (i == h->nhooks) h->nhooks++;
	h->hooks[i] = (struct exit_hook){.pid = pid, .fn = fn, .ctx = ctx};
	pthread_mutex_unlock(&h->hook_lock);
}

void hold_set_exec_fn(struct hold *h, void (*fn)(void *ctx, pid_t pid, uint64_t stop_ns),
		      void (*after)(void *ctx, pid_t pid), void *ctx)
{
	if (!h) return;
	pthread_mutex_lock(&h->exec_lock);
	h->exec_fn = fn;
	h->after_exec_fn = after;
	h->exec_ctx = ctx;
	pthread_mutex_unlock(&h->exec_lock);
}

void hold_set_entry_fn(struct hold *h, void (*fn)(void *ctx, pid_t pid, long ptrace_options),
		       void *ctx)
{
	if (!h) return;
	pthread_mutex_lock(&h->exec_lock);
	h->entry_fn = fn;
	h->entry_ctx = ctx;
	pthread_mutex_unlock(&h->exec_lock);
}

void hold_set_exit_gate(struct hold *h, bool (*busy)(void *ctx, pid_t pid), void *ctx)
{
	if (!h) return;
	pthread_mutex_lock(&h->exec_lock);
	h->exit_busy = busy;
	h->exit_busy_ctx = ctx;
	pthread_mutex_unlock(&h->exec_lock);
}

void hold_clear_exit_hook(struct hold *h, void *ctx)
{
	if (!h) return;
	pthread_mutex_lock(&h->hook_lock);
	for (int i = 0; i < h->nhooks;)
		if (h->hooks[i].ctx == ctx) h->hooks[i] = h->hooks[--h->nhooks];
		else i++;
	while (ctx && h->running_ctx == ctx) pthread_cond_wait(&h->hook_done, &h->hook_lock);
	pthread_mutex_unlock(&h->hook_lock);
}

bool hold_exited(struct hold *h, int *wstatus, int timeout_ms)
{
	struct timespec until = deadline_after_ms(timeout_ms);
	pthread_mutex_lock(&h->lock);
	while (!h->exited && timeout_ms > 0 &&
	       pthread_cond_timedwait(&h->cond, &h->lock, &until) == 0) {}
	bool done = h->exited;
	if (done && wstatus) *wstatus = h->wstatus;
	pthread_mutex_unlock(&h->lock);
	return done;
}

bool hold_pending(struct hold *h, struct hold_event *ev)
{
	if (!h) return false;
	pthread_mutex_lock(&h->lock);
	bool p = h->pending && !h->released;
	if (p) *ev = h->ev;
	pthread_mutex_unlock(&h->lock);
	return p;
}

void hold_release(struct hold *h, pid_t pid)
{
	if (!h) return;
	pthread_mutex_lock(&h->lock);
	if (h->pending && h->ev.pid == pid) {
		h->released = true;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
}

void hold_stats(struct hold *h, double *held_ms, double *max_held_ms, unsigned *holds)
{
	pthread_mutex_lock(&h->lock);
	*held_ms = h->held_ms;
	*max_held_ms = h->max_held_ms;
	*holds = h->holds;
	pthread_mutex_unlock(&h->lock);
}

void hold_detach(struct hold *h)
{
	if (!h) return;
	atomic_store(&h->detach, true);
	pthread_mutex_lock(&h->lock);
	pthread_cond_broadcast(&h->cond); /* a hold in progress ends */
	while (h->state != 2) {
		pthread_mutex_unlock(&h->lock);
		pthread_kill(h->thread, WAKE_SIGNAL); /* again and again: it may not wait yet */
		usleep(2000);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
}

void hold_free(struct hold *h)
{
	if (!h) return;
	pthread_mutex_lock(&h->lock);
	bool running = h->state != 2;
	pthread_mutex_unlock(&h->lock);
	if (running) hold_detach(h); /* forked children still traced: they run on */
	pthread_join(h->thread, NULL);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->hook_lock);
	pthread_mutex_destroy(&h->exec_lock);
	pthread_cond_destroy(&h->hook_done);
	pthread_cond_destroy(&h->cond);
	free(h->hooks);
	free(h->t);
	free(h);
}
