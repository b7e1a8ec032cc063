/* The parser's confinement (see confine.h): no privileges, and a seccomp filter that allows
 * what the parsing code uses and nothing else.
 *
 * The filter is written with libseccomp (Debian's libseccomp-dev) rather than as raw BPF: it
 * resolves syscall numbers and argument checks per architecture and gives the user
 * notification fd without hand-written ioctls. */
#include "confine.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What the parsing code calls: memory, threads and their waits, reading the fds it was given
 * (libelf, libdw, stdio on /proc files the broker opened), its rings and control socket, and
 * messages on stderr. */
static const int allowed[] = {
	SCMP_SYS(read), SCMP_SYS(pread64), SCMP_SYS(readv), SCMP_SYS(preadv), SCMP_SYS(preadv2),
	SCMP_SYS(write), SCMP_SYS(writev), SCMP_SYS(lseek), SCMP_SYS(close), SCMP_SYS(fstat),
	SCMP_SYS(fcntl), SCMP_SYS(dup), SCMP_SYS(getdents64),
	SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect), SCMP_SYS(brk),
	SCMP_SYS(madvise),
	SCMP_SYS(futex), SCMP_SYS(clone), SCMP_SYS(clone3), SCMP_SYS(set_robust_list),
	SCMP_SYS(rseq), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(gettid), SCMP_SYS(getpid),
	SCMP_SYS(getppid), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
	SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(sigaltstack), SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep),
	/* a sleep or poll interrupted by a stop (SIGSTOP, strace) goes on through restart_syscall
	 * after SIGCONT: forbidden, it killed the parser (issue 35) */
	SCMP_SYS(restart_syscall),
	SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(getrandom),
	SCMP_SYS(prlimit64), SCMP_SYS(getrlimit), SCMP_SYS(getuid), SCMP_SYS(geteuid),
	SCMP_SYS(getgid), SCMP_SYS(getegid), SCMP_SYS(uname), SCMP_SYS(getcwd), SCMP_SYS(sysinfo), SCMP_SYS(fstatfs),
	SCMP_SYS(tgkill), SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler),
	SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(poll), SCMP_SYS(ppoll),
	/* a compressed debug file decompressed once into anonymous memory, shared by every
	 * process's unwinder (unwind/debug_copy.c): no file is named, the fds it was given are
	 * read-only */
	SCMP_SYS(memfd_create), SCMP_SYS(ftruncate), SCMP_SYS(pwrite64), SCMP_SYS(pwritev),
};

/* With --listen only: serving HTTP on the listening socket the daemon handed over
 * (libmicrohttpd's accept, epoll and socket options, its eventfd to wake its thread). No
 * socket, bind or connect: it cannot reach out, nor listen anywhere else. */
static const int serving[] = {
	SCMP_SYS(accept4), SCMP_SYS(accept), SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl),
	SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(setsockopt), SCMP_SYS(getsockopt),
	SCMP_SYS(getsockname), SCMP_SYS(getpeername), SCMP_SYS(shutdown), SCMP_SYS(sendto),
	SCMP_SYS(recvfrom), SCMP_SYS(eventfd2), SCMP_SYS(pipe2), SCMP_SYS(select),
	SCMP_SYS(pselect6),
};

/* Sent to the broker: the parser cannot name a file by itself. */
static const int brokered[] = {
	SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(openat2), SCMP_SYS(stat), SCMP_SYS(lstat),
	SCMP_SYS(statx), SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2),
	SCMP_SYS(readlink), SCMP_SYS(readlinkat),
};

/* A bound on what a hostile file can make the parser hold: its address space (libdw maps the
 * objects and debug files, each read up to the debug-info cap; the channels' rings and
 * threads' stacks) and its open files (libdw keeps one per object it reads). Not under
 * AddressSanitizer, whose shadow memory is a reservation of terabytes. */
#if defined(__SANITIZE_ADDRESS__)
#define PARSER_MAX_AS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PARSER_MAX_AS 0
#endif
#endif
#ifndef PARSER_MAX_AS
#define PARSER_MAX_AS (64ULL << 30)
#endif

static int limit_address_space(void)
{
	if (!PARSER_MAX_AS) return 0;
	struct rlimit as = {PARSER_MAX_AS, PARSER_MAX_AS};
	return setrlimit(RLIMIT_AS, &as);
}

static int drop_privileges(char *err, size_t errlen)
{
	uid_t uid = 65534;
	gid_t gid = 65534; /* nobody, nogroup (looked up by the daemon would need NSS here) */
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
			snprintf(err, errlen, "cannot drop capability %d from the bounding set: %s", cap,
				 strerror(errno));
			return -1;
		}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
		snprintf(err, errlen, "cannot become nobody: %s", strerror(errno));
		return -1;
	}
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0) {
		snprintf(err, errlen, "cannot clear the capabilities: %s", strerror(errno));
		return -1;
	}
	/* not ptrace-able by other processes of nobody, no core file of what it parsed; and gone
	 * with the daemon (set after the uid change, which clears it) */
	struct rlimit none = {0, 0}, files;
	/* lowered only: raising a hard limit needs a capability it no longer has */
	if (getrlimit(RLIMIT_NOFILE, &files) < 0 || files.rlim_max > PARSER_MAX_FILES)
		files.rlim_max = PARSER_MAX_FILES;
	files.rlim_cur = files.rlim_max;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || setrlimit(RLIMIT_CORE, &none) < 0 ||
	    setrlimit(RLIMIT_NOFILE, &files) < 0 || limit_address_space() < 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot set the process's limits: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* A forbidden system call traps (it never runs) into this handler, which says which one on
 * stderr and dies of SIGSYS, as the kernel's kill would: the daemon reports that, and the
 * user reads what was asked for. Async-signal-safe: a table lookup and write(2). */
static void on_forbidden(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	char msg[160], num[16];
	int k = 0, n = si->si_syscall;
	do num[k++] = (char)('0' + n % 10); while ((n /= 10) && k < 15);
	const char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, si->si_syscall);
	size_t len = 0;
	const char *parts[] = {"memtraced: the unprivileged parser made a forbidden system call: ",
			       name ? name : "?", " (", NULL};
	for (int i = 0; parts[i]; i++)
		for (const char *c = parts[i]; *c && len < sizeof msg - 20; c++) msg[len++] = *c;
	while (k) msg[len++] = num[--k];
	msg[len++] = ')';
	msg[len++] = '\n';
	if (write(2, msg, len) < 0) { /* nothing more to do */ }
	(void)sig; /* SA_RESETHAND | SA_NODEFER: the default action now, not blocked */
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGSYS);
	_exit(128 + SIGSYS);
}

int sandbox_confine(bool serving_http, char *err, size_t errlen)
{
	if (drop_privileges(err, errlen) < 0) return -1;
	struct sigaction sa = {.sa_sigaction = on_forbidden,
			      .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSYS, &sa, NULL);
	/* TRAP, not KILL: the call is refused all the same (a parser that handled SIGSYS itself
	 * would go on without it); the handler names it */
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx) {
		snprintf(err, errlen, "cannot create the seccomp filter");
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < sizeof allowed / sizeof allowed[0] && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	for (size_t i = 0; serving_http && i < sizeof serving / sizeof serving[0] && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, serving[i], 0);
	/* libmicrohttpd names its threads (PR_SET_NAME); no other prctl */
	if (serving_http && rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
	/* fstat(fd) is newfstatat(fd, "", AT_EMPTY_PATH) in glibc: allowed with that flag (its
	 * path is not looked at: with another path it stats that as nobody, which only tells
	 * what any process of nobody can see), the broker's otherwise */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(newfstatat), 1,
				      SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(newfstatat), 1,
				      SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, 0));
	/* libdw starts its debuginfod client (with no server: DEBUGINFOD_URLS is unset here),
	 * whose libcurl makes a wake-up pair of local sockets: that, and no other socket */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	for (size_t i = 0; i < sizeof brokered / sizeof brokered[0] && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, brokered[i], 0);
	if (rc == 0) rc = seccomp_load(ctx);
	int fd = rc == 0 ? seccomp_notify_fd(ctx) : -1;
	if (rc != 0 || fd < 0) {
		snprintf(err, errlen, "cannot install the seccomp filter: %s",
			 strerror(rc < 0 ? -rc : EINVAL));
		seccomp_release(ctx);
		return -1;
	}
	/* the filter stays loaded without its context; the notification fd is for the daemon
	 * (the parser closes it once sent, and has no ioctl to answer its own calls with) */
	seccomp_release(ctx);
	return fd;
}
