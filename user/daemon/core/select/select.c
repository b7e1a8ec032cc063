/* Selecting processes by name and cgroup (select.h). */
#include "select.h"
#include "door/door.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

bool select_active(const struct select_opts *s) { return s->nmatch > 0 || s->ncgroup > 0; }

/* Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a
 * hybrid host (our own mountinfo). */
bool select_cgroup_root(char *out, size_t len)
{
	FILE *f = door_proc_fopen(getpid(), "mountinfo");
	char line[1024];
	bool found = false;
	while (f && !found && fgets(line, sizeof line, f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER */
		char mnt[512], fstype[64];
		const char *dash = strstr(line, " - ");
		if (dash && sscanf(dash, " - %63s", fstype) == 1 && strcmp(fstype, "cgroup2") == 0 &&
		    sscanf(line, "%*s %*s %*s %*s %511s", mnt) == 1) {
			snprintf(out, len, "%s", mnt);
			found = true;
		}
	}
	if (f) fclose(f);
	return found;
}

bool select_add_cgroup(struct select_opts *s, const char *path, char *err, size_t errlen)
{
	if (s->ncgroup == SELECT_MAX) {
		snprintf(err, errlen, "too many --cgroup (at most %d)", SELECT_MAX);
		return false;
	}
	char root[512];
	if (!select_cgroup_root(root, sizeof root)) {
		snprintf(err, errlen, "--cgroup '%s': no cgroup v2 hierarchy is mounted", path);
		return false;
	}
	const char *rel = path;
	if (strncmp(rel, root, strlen(root)) == 0 && (rel[strlen(root)] == '/' || !rel[strlen(root)]))
		rel += strlen(root);
	char norm[512];
	int n = snprintf(norm, sizeof norm, "/%s", rel + strspn(rel, "/"));
	if (n < 0 || (size_t)n >= sizeof norm || strstr(norm, "/..")) {
		snprintf(err, errlen, "invalid --cgroup '%s'", path);
		return false;
	}
	while (n > 1 && norm[n - 1] == '/') norm[--n] = '\0';
	char dir[1100];
	struct statfs fs;
	snprintf(dir, sizeof dir, "%s%s", root, strcmp(norm, "/") ? norm : "");
	if (statfs(dir, &fs) != 0) {
		snprintf(err, errlen, "--cgroup '%s': %s is no cgroup v2 directory (%s)", path, dir,
			 strerror(errno));
		return false;
	}
	if (fs.f_type != CGROUP2_SUPER_MAGIC) {
		snprintf(err, errlen, "--cgroup '%s': %s is no cgroup v2 directory", path, dir);
		return false;
	}
	snprintf(s->cgroup[s->ncgroup++], sizeof s->cgroup[0], "%s", norm);
	return true;
}

/* Does argv0 name the executable itself: a link to it (Debian's /usr/bin/redis-server to
 * redis-check-rdb), found as the process's root has it (an absolute path, or a name in the
 * system's PATH directories, which only root writes)? Then the name is no claim of the
 * process's own: a decoy's "exec -a NAME" names another file or none (issue 46). */
static bool argv0_names_exe(pid_t pid, const char *argv0)
{
	if (!argv0[0] || (strchr(argv0, '/') && argv0[0] != '/')) return false;
	int exe = door_proc_open(pid, "exe", false);
	struct stat xs;
	bool ok = exe >= 0 && fstat(exe, &xs) == 0;
	if (exe >= 0) close(exe);
	int root = ok ? door_proc_root(pid) : -1;
	if (root < 0) return false;
	static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
					   "/usr/bin", "/sbin", "/bin"};
	bool same = false;
	for (size_t i = 0; i < (argv0[0] == '/' ? 1 : sizeof dirs / sizeof dirs[0]) && !same; i++) {
		char path[4200];
		if (argv0[0] == '/') snprintf(path, sizeof path, "%s", argv0);
		else snprintf(path, sizeof path, "%s/%s", dirs[i], argv0);
		int fd = door_open_at(root, path, 0, true);
		struct stat st;
		same = fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == xs.st_dev && st.st_ino == xs.st_ino;
		if (fd >= 0) close(fd);
	}
	close(root);
	return same;
}

int select_describe(pid_t pid, struct select_proc *p)
{
	memset(p, 0, sizeof *p);
	if (door_proc_readlink(pid, "exe", p->exe, sizeof p->exe) <= 0)
		return -1; /* gone, or a kernel thread */
	char *del = strstr(p->exe, " (deleted)");
	if (del && del[10] == '\0') *del = '\0';
	door_proc_line(pid, "comm", p->comm, sizeof p->comm);
	FILE *f = door_proc_fopen(pid, "cmdline");
	if (f) {
		size_t got = fread(p->argv0, 1, sizeof p->argv0 - 1, f);
		p->argv0[got] = '\0'; /* the first NUL ends argv[0] */
		fclose(f);
	}
	p->pid = pid;
	/* cgroup v2: the line "0::/PATH" */
	f = door_proc_fopen(pid, "cgroup");
	char line[600];
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(p->cgroup, sizeof p->cgroup, "%.*s", (int)sizeof p->cgroup - 1, line + 3);
		}
	if (f) fclose(f);
	return 0;
}

static const char *base_of(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* The executable's path and base name, and the name it was started as where that names the
 * executable (a link to it); with --match-argv0 also any name it was started as and its comm,
 * which any process sets as it likes (exec -a, PR_SET_NAME): decoys of any user filled
 * --max-processes and kept root's service untraced (issue 46). */
static bool pattern_matches(const char *pat, const struct select_proc *p, bool by_argv0,
			    char *why, size_t whylen)
{
	const char *names[] = {p->exe, base_of(p->exe), p->argv0, base_of(p->argv0), p->comm};
	static const char *const what[] = {"executable", "executable", "started as", "started as",
					   "name"};
	size_t n = by_argv0 ? sizeof names / sizeof names[0] : 4;
	for (size_t i = 0; i < n; i++)
		if (names[i][0] && fnmatch(pat, names[i], 0) == 0 &&
		    (i < 2 || by_argv0 || argv0_names_exe(p->pid, p->argv0))) { /* (checked last: costly) */
			if (why) snprintf(why, whylen, "%s %s matches '%s'", what[i], names[i], pat);
			return true;
		}
	return false;
}

static bool in_cgroup(const char *cg, const char *proc_cg)
{
	if (strcmp(cg, "/") == 0) return proc_cg[0] == '/';
	size_t n = strlen(cg);
	return strncmp(proc_cg, cg, n) == 0 && (proc_cg[n] == '\0' || proc_cg[n] == '/');
}

bool select_matches(const struct select_opts *s, const struct select_proc *p, char *why,
		    size_t whylen)
{
	if (!select_active(s) || !p->exe[0]) return false;
	char by[600] = "";
	bool named = s->nmatch == 0;
	for (int i = 0; i < s->nmatch && !named; i++)
		named = pattern_matches(s->match[i], p, s->by_argv0, by, sizeof by);
	if (!named) return false;
	bool grouped = s->ncgroup == 0;
	int g = 0;
	for (; g < s->ncgroup && !grouped; g++) grouped = in_cgroup(s->cgroup[g], p->cgroup);
	if (!grouped) return false;
	if (why) {
		if (s->ncgroup && by[0]) snprintf(why, whylen, "%s, in cgroup %s", by, s->cgroup[g - 1]);
		else if (s->ncgroup) snprintf(why, whylen, "in cgroup %s", s->cgroup[g - 1]);
		else snprintf(why, whylen, "%s", by);
	}
	return true;
}

/* Ours: this process and the processes it started (the parser, a -- CMD is never selected). */
static bool is_ours(pid_t pid)
{
	if (pid == getpid()) return true;
	char stat[512];
	if (!door_proc_line(pid, "stat", stat, sizeof stat)) return true;
	const char *close = strrchr(stat, ')');
	int ppid = 0;
	char state;
	return !close || sscanf(close + 1, " %c %d", &state, &ppid) != 2 || ppid == getpid() ||
	       state == 'Z';
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

int select_scan(const struct select_opts *s, pid_t *out, int max)
{
	DIR *d = door_proc_list();
	if (!d) return 0;
	int n = 0;
	struct dirent *e;
	while (n < max && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0])) continue;
		pid_t pid = (pid_t)atoi(e->d_name);
		struct select_proc p;
		if (pid <= 1 || select_describe(pid, &p) < 0 || !select_matches(s, &p, NULL, 0) ||
		    is_ours(pid))
			continue;
		out[n++] = pid;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof *out, by_pid);
	return n;
}
