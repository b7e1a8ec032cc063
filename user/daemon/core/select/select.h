/* Which processes a host-wide memtraced traces besides its -p PIDs (--match, --cgroup): a
 * shell pattern on the executable's path or base name, or on the name the program was
 * started as; a cgroup v2 subtree (where systemd and Kubernetes put a service). A process is
 * selected when it matches one of the patterns (if any were given) and lies in one of the
 * cgroups (if any were given). What is read of a process comes through the door: its exe
 * link, comm, cmdline and cgroup files. */
#ifndef MEMTRACED_SELECT_H
#define MEMTRACED_SELECT_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SELECT_MAX 16                 /* patterns, and cgroups */
#define SELECT_DEFAULT_MAX_PROCESSES 64

struct select_opts {
	const char *match[SELECT_MAX];
	int nmatch;
	char cgroup[SELECT_MAX][512];  /* normalized: "/system.slice/redis.service", "/" for all */
	int ncgroup;
	int max_processes;
	bool by_argv0; /* --match-argv0: the name it was started as and its comm match too */
};

/* The cgroup v2 mount point (/sys/fs/cgroup, /sys/fs/cgroup/unified on a hybrid host). */
bool select_cgroup_root(char *out, size_t len);
/* Adds --cgroup PATH: relative to the cgroup v2 root, or a path under it. false with a
 * message when it is not a cgroup directory. */
bool select_add_cgroup(struct select_opts *s, const char *path, char *err, size_t errlen);
bool select_active(const struct select_opts *s);

/* What a process is, as the selection sees it (select_describe). */
struct select_proc {
	char exe[4096];      /* its executable's path ("" for a kernel thread) */
	char argv0[256];     /* the name it was started as */
	pid_t pid;
	char comm[32];
	char cgroup[512];    /* its cgroup v2 path */
};
/* 0, or -1 when the process is gone or is no program (a kernel thread). */
int select_describe(pid_t pid, struct select_proc *p);
/* Is a process so described selected? why (may be NULL): what matched. */
bool select_matches(const struct select_opts *s, const struct select_proc *p, char *why,
		    size_t whylen);

/* The selected processes running now (never this process, its parser, nor one of ours), in
 * pid order: how many were put into out (at most max). */
int select_scan(const struct select_opts *s, pid_t *out, int max);

#endif
