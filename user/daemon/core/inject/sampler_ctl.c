/* Placing, starting and stopping our in-process sampler in a target (see sampler_ctl.h). */
#include "sampler_ctl.h"
#include "door/door.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "claim.h"
#include "inject.h"
#include "agent.h"
#include "inject_agent.h"
#include "safe_moment.h"

int sampler_library_path(char *out, size_t outlen, char *err, size_t errlen)
{
	const char *env = getenv("MEMTRACED_SAMPLER");
	char buf[PATH_MAX];
	if (env && env[0]) {
		snprintf(buf, sizeof buf, "%s", env);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n <= 0) {
			snprintf(err, errlen, "cannot find memtraced's own executable: %s", strerror(errno));
			return -1;
		}
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) *slash = '\0';
		if (snprintf(buf, sizeof buf, "%.3900s/../lib/%s", exe, SAMPLER_LIB_NAME) >= (int)sizeof buf) {
			snprintf(err, errlen, "memtraced's path is too long");
			return -1;
		}
	}
	/* absolute and canonical: the target resolves it in its own working directory */
	if (!realpath(buf, out) || strlen(out) >= outlen) {
		snprintf(err, errlen, "the sampler library %s is not there (%s; set MEMTRACED_SAMPLER)",
			 buf, strerror(errno));
		return -1;
	}
	return 0;
}

/* Does pid see the file system as we do (same root directory)? */
static bool same_root(pid_t pid)
{
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root/", (int)pid);
	struct stat a, b;
	return stat(root, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* dlopen, the functions, the version check, in an injector session. */
static int load_in(struct inject_session *s, struct sampler_ctl *c, char *err, size_t errlen)
{
	uint64_t handle = 0, version_fn = 0, version = 0;
	if (inject_session_dlopen(s, c->path, &handle, err, errlen) != 0 ||
	    inject_session_dlsym(s, handle, "memtraced_sampler_version", &version_fn, err, errlen) != 0 ||
	    inject_session_dlsym(s, handle, "memtraced_sampler_start", &c->start, err, errlen) != 0 ||
	    inject_session_dlsym(s, handle, "memtraced_sampler_stop", &c->stop, err, errlen) != 0 ||
	    inject_session_dlsym(s, handle, "memtraced_sampler_check", &c->check, err, errlen) != 0 ||
	    inject_session_dlsym(s, handle, "memtraced_sampler_thin", &c->thin, err, errlen) != 0 ||
	    inject_session_dlsym(s, handle, "memtraced_sampler_stats", &c->stats, err, errlen) != 0 ||
	    inject_session_call(s, version_fn, NULL, 0, &version, err, errlen) != 0)
		return -1;
	c->version = (long)version;
	if (c->version != SAMPLER_VERSION) {
		snprintf(err, errlen, "the sampler library in PID %d is version %ld, this memtraced "
			 "needs %d", (int)c->pid, c->version, SAMPLER_VERSION);
		return -1;
	}
	return 0;
}

static bool read_calls(const struct sampler_ctl *c, uint64_t *calls);

static int start_in(struct inject_session *s, struct sampler_ctl *c, double rate, long *slots,
		    char *err, size_t errlen)
{
	uint64_t flags, gap = sampler_mean_gap(rate, &flags), ret = 0;
	uint64_t args[2] = {gap, flags};
	c->counting = true;
	if (!read_calls(c, &c->calls_at_start)) c->calls_at_start = 0; /* stopped: none counted */
	if (inject_session_call(s, c->start, args, 2, &ret, err, errlen) != 0) return -1;
	if ((long)ret < 0) {
		snprintf(err, errlen, "the sampler could not start in PID %d: %s", (int)c->pid,
			 strerror((int)-(long)ret));
		return -1;
	}
	c->started = true;
	if (slots) *slots = (long)ret;
	return 0;
}

int sampler_place_held(pid_t pid, pid_t tid, long ptrace_options, struct sampler_ctl *c,
		       double rate, long *slots, char *err, size_t errlen)
{
	struct inject_session *s;
	if (inject_adopt(pid, tid, ptrace_options, &s, err, errlen) != 0) return -1;
	int rc = load_in(s, c, err, errlen) == 0 && start_in(s, c, rate, slots, err, errlen) == 0 ? 0 : -1;
	char e2[256];
	if (inject_detach(s, e2, sizeof e2) != 0 && rc == 0) {
		snprintf(err, errlen, "%s", e2);
		rc = -1;
	}
	return rc;
}

/* Test hook (tests/test_inject_kill.sh): MEMTRACED_TEST_KILL=PHASE:USEC SIGKILLs memtraced
 * USEC microseconds after the phase (place, start or stop) begins, as a service manager's
 * stop timeout would: the target must not notice. */
static void *kill_later(void *arg)
{
	usleep((useconds_t)(uintptr_t)arg);
	kill(getpid(), SIGKILL);
	return NULL;
}

static void test_kill_hook(const char *phase)
{
	const char *v = getenv("MEMTRACED_TEST_KILL");
	size_t n = strlen(phase);
	if (!v || strncmp(v, phase, n) != 0 || v[n] != ':') return;
	pthread_t t;
	if (pthread_create(&t, NULL, kill_later, (void *)(uintptr_t)strtoul(v + n + 1, NULL, 10)) == 0)
		pthread_detach(t);
}

/* Test hook (tests/test_inject_harm.sh): MEMTRACED_TEST_NO_SAFE=start finds no thread at a
 * safe moment for the start job, as a program that is always in its allocator would (issue
 * 47: the placement then stayed and memtraced exited 1 instead of falling back to uprobes). */
static bool no_safe_now;

static bool safe_or_test(void *ctx, pid_t pid, pid_t tid, const struct user_regs_struct *r,
			 char *why, size_t whylen)
{
	if (no_safe_now) {
		snprintf(why, whylen, "thread %d is never safe (MEMTRACED_TEST_NO_SAFE)", (int)tid);
		return false;
	}
	return safe_moment_check(ctx, pid, tid, r, why, whylen);
}

/* One job by the agent, its version checked. */
static int agent_job(struct sampler_ctl *c, uint64_t op, uint64_t a0, uint64_t a1,
		     struct inject_agent_result *res, char *err, size_t errlen)
{
	if (inject_agent_run(c->agent, c->path, op, a0, a1, 30000, res, err, errlen) != 0) return -1;
	c->safe_wait_ms += res->safe_wait_ms;
	c->agent_stub_tid = res->stub_tid;
	if (res->version != SAMPLER_VERSION) {
		snprintf(err, errlen, "the sampler library in PID %d is version %ld, this memtraced "
			 "needs %d", (int)c->pid, (long)res->version, SAMPLER_VERSION);
		return -1;
	}
	c->version = (long)res->version;
	c->check = res->check_addr;
	c->thin = res->thin_addr;
	c->stats = res->stats_addr;
	return 0;
}

int sampler_place(pid_t pid, const char *path, struct sampler_ctl *c, char *err, size_t errlen)
{
	int claim = c->claim_fd; /* the session's, kept */
	memset(c, 0, sizeof *c);
	c->claim_fd = claim;
	c->pid = pid;
	snprintf(c->path, sizeof c->path, "%s", path);
	test_kill_hook("place");
	char proc[32];
	snprintf(proc, sizeof proc, "/proc/%d", (int)pid);
	if (access(proc, F_OK) != 0) {
		snprintf(err, errlen, "PID %d exited", (int)pid);
		return -1;
	}
	if (!same_root(pid)) {
		char link[64], root[512] = "";
		snprintf(link, sizeof link, "/proc/%d/root", (int)pid);
		ssize_t n = readlink(link, root, sizeof root - 1);
		root[n > 0 ? n : 0] = 0;
		snprintf(err, errlen, "PID %d runs in another root directory (%s: %s): the sampler "
			 "library is not visible there", (int)pid, n > 1 ? root : "?",
			 n > 1 ? "a chroot" : "a container");
		return -1;
	}
	char why[512];
	if (inject_check_target(pid, why, sizeof why) != 0) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	/* Loaded already (an earlier --inject)? Said in the summary; dlopen then only counts. */
	uint64_t addr;
	c->reused = inject_find_symbol(pid, "memtraced_sampler_version", &addr, NULL, 0, why,
				       sizeof why) == 0;
	c->safety = safe_moment_open(pid);
	if (inject_agent_open(pid, safe_or_test, c->safety, &c->agent, err, errlen) != 0) return -1;
	struct inject_agent_result res;
	return agent_job(c, INJECT_AGENT_NONE, 0, 0, &res, err, errlen);
}

uint64_t sampler_mean_gap(double rate, uint64_t *flags)
{
	/* MEMTRACED_SAMPLER_ALL_WORDS at rate 1; always MEMTRACED_SAMPLER_LEASED: ours lapses
	 * when we are gone (user/sampler/sampler.h) */
	*flags = (rate >= 1 ? SAMPLER_FLAG_ALL_WORDS : 0) | SAMPLER_FLAG_LEASED;
	return rate >= 1 ? 8 : (uint64_t)llround(8 / rate); /* as the tracer's mean_gap */
}

int sampler_start(struct sampler_ctl *c, double rate, long *slots, char *err, size_t errlen)
{
	uint64_t flags, gap = sampler_mean_gap(rate, &flags);
	struct inject_agent_result res;
	test_kill_hook("start");
	if (!c->agent) {
		snprintf(err, errlen, "the sampler was not placed in PID %d", (int)c->pid);
		return -1;
	}
	c->counting = true;
	if (!read_calls(c, &c->calls_at_start)) c->calls_at_start = 0; /* stopped: none counted */
	const char *hook = getenv("MEMTRACED_TEST_NO_SAFE");
	no_safe_now = hook && strcmp(hook, "start") == 0;
	int rc = agent_job(c, INJECT_AGENT_START, gap, flags, &res, err, errlen);
	no_safe_now = false;
	if (rc != 0) return -1;
	if (res.ret < 0) {
		snprintf(err, errlen, "the sampler could not start in PID %d: %s", (int)c->pid,
			 strerror((int)-res.ret));
		return -1;
	}
	c->started = true;
	if (slots) *slots = (long)res.ret;
	return 0;
}

int sampler_stop(struct sampler_ctl *c, char *err, size_t errlen)
{
	if (!c->started) return 0;
	c->started = false;
	if (kill(c->pid, 0) < 0 && errno == ESRCH) return 0;
	test_kill_hook("stop");
	if (c->agent) {
		struct inject_agent_result res;
		return agent_job(c, INJECT_AGENT_STOP, 0, 0, &res, err, errlen);
	}
	uint64_t ret = 0; /* placed at the entry point by our hold: a call on its thread */
	return inject_call(c->pid, c->stop, NULL, 0, &ret, err, errlen);
}

void sampler_ctl_free(struct sampler_ctl *c, bool alive)
{
	if (!c) return;
	if (c->agent && !alive) {
		/* nothing to unmap in a process that is gone or not ours to touch */
		inject_agent_forget(c->agent);
	} else {
		inject_agent_close(c->agent);
	}
	safe_moment_close(c->safety);
	inject_claim_release(c->claim_fd);
	free(c);
}
static bool read_calls(const struct sampler_ctl *c, uint64_t *calls)
{
	if (!c->stats) return false;
	int fd = door_proc_open(c->pid, "mem", false);
	ssize_t n = fd >= 0 ? pread(fd, calls, sizeof *calls, (off_t)(c->stats + SAMPLER_STATS_OFF_CALLS)) : -1;
	if (fd >= 0) close(fd);
	return n == (ssize_t)sizeof *calls;
}

bool sampler_calls(const struct sampler_ctl *c, uint64_t *calls)
{
	uint64_t now;
	if (!c || !c->counting || !read_calls(c, &now) || now < c->calls_at_start) return false;
	*calls = now - c->calls_at_start;
	return true;
}

int sampler_read_check(const struct sampler_ctl *c, struct memtraced_sampler_check *out,
		       char *err, size_t errlen)
{
	int fd = door_proc_open(c->pid, "mem", false);
	ssize_t n = fd >= 0 ? pread(fd, out, sizeof *out, (off_t)c->check) : -1;
	int e = errno;
	if (fd >= 0) close(fd);
	if (n != (ssize_t)sizeof *out) {
		snprintf(err, errlen, "cannot read the sampler's check in PID %d: %s", (int)c->pid,
			 n < 0 ? strerror(e) : "short read");
		return -1;
	}
	return 0;
}

int sampler_second_copies(pid_t pid, char *first, size_t firstlen)
{
	/* per file: its mappings from offset 0, and whether any maps code (a data file mapped
	 * twice is no second namespace) */
	enum { MAX_FILES = 1024 };
	static struct { uint64_t dev, ino; int starts; bool code; char path[256]; } seen[MAX_FILES];
	int nseen = 0, copies = 0; /* seen: main thread only */
	char line[4400];
	if (firstlen) first[0] = 0;
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long long offset, ino;
		unsigned maj, min;
		char perms[8];
		int path = 0;
		if (sscanf(line, "%*x-%*x %7s %llx %x:%x %llu %n", perms, &offset, &maj, &min, &ino,
			   &path) < 5 || !ino || !path)
			continue;
		uint64_t dev = ((uint64_t)maj << 32) | min;
		int i = 0;
		while (i < nseen && !(seen[i].dev == dev && seen[i].ino == ino)) i++;
		if (i == nseen) {
			if (nseen == MAX_FILES) continue;
			line[strcspn(line, "\n")] = 0;
			seen[nseen].dev = dev;
			seen[nseen].ino = ino;
			seen[nseen].starts = 0;
			seen[nseen].code = false;
			snprintf(seen[nseen++].path, sizeof seen[0].path, "%s", line + path);
		}
		seen[i].starts += offset == 0;
		seen[i].code = seen[i].code || perms[2] == 'x';
	}
	fclose(f);
	for (int i = 0; i < nseen; i++) {
		if (seen[i].starts < 2 || !seen[i].code) continue;
		if (copies++ == 0 && firstlen) snprintf(first, firstlen, "%s", seen[i].path);
	}
	return copies;
}

void sampler_slot_object(pid_t pid, uint64_t addr, char *out, size_t outlen)
{
	char line[4400];
	snprintf(out, outlen, "?");
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return;
	while (fgets(line, sizeof line, f)) {
		uint64_t lo, hi;
		int off = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %n", &lo, &hi, &off) < 2 ||
		    addr < lo || addr >= hi)
			continue;
		line[strcspn(line, "\n")] = 0;
		if (off > 0 && line[off]) snprintf(out, outlen, "%s", line + off);
		break;
	}
	fclose(f);
}
