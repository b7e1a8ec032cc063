/* probe_cost: attaches EMPTY BPF programs to libc functions of a running process, so that the
 * micro benchmark can measure what the probes alone cost (the trap), apart from any tracer.
 *
 *   probe_cost -p PID [-k KIND] SITE...   SITE = libc symbol[+byte offset] (malloc, free+9), or
 *                                         "auto": the sites memtraced probes (allocsyms.h)
 *
 * KIND says how the sites are probed (a site whose name starts with "free" is a free site):
 *   multi     an entry program through a uprobe_multi link on every site
 *   session   allocation sites: a session uprobe whose entry returns 1, so no return probe
 *             (what memtraced does for unsampled calls); free sites: multi (memtraced's floor)
 *   uretprobe allocation sites: an entry probe plus a return probe; free sites: entry only
 *             (what bcc memleak does)
 *   perf      one classic perf-event uprobe per site (how bcc and older libbpf attach)
 * The programs are two instructions (r0 = K; exit), loaded from raw instructions, so this tool
 * needs no clang and nothing of the tracer. It prints "attached N sites" and holds the probes
 * until SIGINT/SIGTERM. It is the bench's own floor before `memtraced --probe-floor` exists,
 * and the source of the design figures in docs/performance.md (session vs uretprobe, ...).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "sites/allocsyms.h"

/* Not in Debian 12's uapi headers (linux-libc-dev 6.1) nor in libbpf 1.1.2. */
#define ATTACH_UPROBE_MULTI 48
#define ATTACH_UPROBE_SESSION 57
#define UPROBE_MULTI_RETURN 1u
#define MAX_SITES MAX_PROBE_SITES

struct link_create_uprobe_multi { /* union bpf_attr, link_create with the uprobe_multi member */
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid;
};

static volatile sig_atomic_t stop;
static void on_stop(int sig) { (void)sig; stop = 1; }

/* The object mapped into PID whose name contains "libc.so", as a path we can open. */
static int find_libc(int pid, char *out, size_t outlen)
{
	char maps[64], line[4096 + 256];
	snprintf(maps, sizeof maps, "/proc/%d/maps", pid);
	FILE *f = fopen(maps, "r");
	if (!f) { fprintf(stderr, "probe_cost: cannot read %s: %s\n", maps, strerror(errno)); return -1; }
	int found = -1;
	while (fgets(line, sizeof line, f)) {
		char *path = strchr(line, '/');
		if (!path || !strstr(path, "/libc.so")) continue;
		path[strcspn(path, "\n")] = 0;
		snprintf(out, outlen, "/proc/%d/root%s", pid, path);
		found = 0;
		break;
	}
	fclose(f);
	if (found) fprintf(stderr, "probe_cost: process %d has no libc.so mapped\n", pid);
	return found;
}

/* File offset of a dynamic symbol (what uprobes take), or -1. */
static long symbol_file_offset(const char *path, const char *name)
{
	long res = -1;
	int fd = open(path, O_RDONLY);
	if (fd < 0) return -1;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Addr value = 0;
	for (Elf_Scn *scn = NULL; e && !value && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize) continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, i, &s) || !s.st_value) continue;
			const char *n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strcmp(n, name)) { value = s.st_value; break; }
		}
	}
	size_t nph = 0;
	if (e && value) elf_getphdrnum(e, &nph);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr p;
		if (gelf_getphdr(e, i, &p) && p.p_type == PT_LOAD && value >= p.p_vaddr &&
		    value < p.p_vaddr + p.p_memsz) {
			res = (long)(value - p.p_vaddr + p.p_offset);
			break;
		}
	}
	if (e) elf_end(e);
	close(fd);
	return res;
}

static int load_empty_prog(int ret, int attach_type)
{
	struct bpf_insn insns[2] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = ret },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = attach_type);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "probe_cost", "GPL", insns, 2, &o);
	if (fd < 0) fprintf(stderr, "probe_cost: loading an empty program (attach type %d): %s\n", attach_type, strerror(errno));
	return fd;
}

static int link_multi(int prog, int attach_type, const char *path, unsigned long *offs, int n, int pid, unsigned flags)
{
	union { struct link_create_uprobe_multi l; char pad[sizeof(union bpf_attr)]; } a;
	memset(&a, 0, sizeof a);
	a.l.prog_fd = prog;
	a.l.attach_type = attach_type;
	a.l.path = (uintptr_t)path;
	a.l.offsets = (uintptr_t)offs;
	a.l.cnt = n;
	a.l.multi_flags = flags;
	a.l.pid = pid;
	int fd = syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof a);
	if (fd < 0) fprintf(stderr, "probe_cost: uprobe_multi link (attach type %d) on %s: %s\n", attach_type, path, strerror(errno));
	return fd;
}

static int read_int_file(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;
	if (f) { if (fscanf(f, "%d", &v) != 1) v = -1; fclose(f); }
	return v;
}

static int perf_uprobe(int prog, const char *path, unsigned long off, int pid, int ret)
{
	int type = read_int_file("/sys/bus/event_source/devices/uprobe/type");
	if (type < 0) { fprintf(stderr, "probe_cost: no uprobe PMU in /sys/bus/event_source/devices\n"); return -1; }
	struct perf_event_attr attr = { .size = sizeof attr, .type = type, .config = ret ? 1 : 0,
					 .config1 = (uintptr_t)path, .config2 = off, .sample_period = 1 };
	int fd = syscall(__NR_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 || ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		fprintf(stderr, "probe_cost: perf uprobe at %s+%#lx: %s\n", path, off, strerror(errno));
		return -1;
	}
	return fd;
}

struct site { char path[4200]; unsigned long offset; int is_free; };

/* SITE = symbol[+offset] in the process's libc. */
static int resolve_libc_site(int pid, const char *spec, struct site *out)
{
	char name[128];
	long extra = 0;
	snprintf(name, sizeof name, "%s", spec);
	char *plus = strchr(name, '+');
	if (plus) { *plus = 0; extra = strtol(plus + 1, NULL, 0); }
	if (find_libc(pid, out->path, sizeof out->path)) return -1;
	long off = symbol_file_offset(out->path, name);
	if (off < 0) { fprintf(stderr, "probe_cost: no symbol '%s' in %s\n", name, out->path); return -1; }
	out->offset = off + extra;
	out->is_free = !strncmp(name, "free", 4);
	return 0;
}

int main(int argc, char **argv)
{
	int pid = 0;
	const char *kind = "multi";
	for (int c; (c = getopt(argc, argv, "p:k:")) != -1;) {
		if (c == 'p') pid = atoi(optarg);
		else if (c == 'k') kind = optarg;
		else goto usage;
	}
	int nspecs = argc - optind;
	if (pid <= 0 || nspecs <= 0 || nspecs > MAX_SITES) goto usage;
	int is_multi = !strcmp(kind, "multi"), is_session = !strcmp(kind, "session");
	int is_uret = !strcmp(kind, "uretprobe"), is_perf = !strcmp(kind, "perf");
	if (!is_multi && !is_session && !is_uret && !is_perf) {
		fprintf(stderr, "probe_cost: unknown kind '%s' (multi, session, uretprobe, perf)\n", kind);
		return 2;
	}
	static struct site sites[MAX_SITES];
	int nsites = 0;
	if (nspecs == 1 && !strcmp(argv[optind], "auto")) {
		static struct alloc_sites as;
		char err[512];
		if (alloc_sites_for_pid(pid, &as, err, sizeof err)) {
			fprintf(stderr, "probe_cost: finding the allocator of %d: %s\n", pid, err);
			return 1;
		}
		for (int i = 0; i < as.n && nsites < MAX_SITES; i++, nsites++) {
			snprintf(sites[nsites].path, sizeof sites[nsites].path, "%s", as.sites[i].path);
			sites[nsites].offset = as.sites[i].probe_offset;
			sites[nsites].is_free = as.sites[i].fn == AF_FREE;
			printf("site %s %s+%#lx%s\n", alloc_fn_name(as.sites[i].fn), as.sites[i].path,
			       (unsigned long)as.sites[i].probe_offset,
			       as.sites[i].probe_offset != as.sites[i].entry_offset ? " (after the entry)" : "");
		}
		printf("allocator: %s\n", as.allocator);
	} else {
		for (; nsites < nspecs; nsites++)
			if (resolve_libc_site(pid, argv[optind + nsites], &sites[nsites])) return 1;
	}

	int prog_entry = load_empty_prog(0, is_perf ? 0 : ATTACH_UPROBE_MULTI);
	int prog_session = is_session ? load_empty_prog(1, ATTACH_UPROBE_SESSION) : 0; /* 1 = no return probe */
	if (prog_entry < 0 || prog_session < 0) return 1;
	int nfds = 0, fds[2 * MAX_SITES];
	for (int i = 0; i < nsites; i++) {
		struct site *s = &sites[i];
		if (is_perf) fds[nfds++] = perf_uprobe(prog_entry, s->path, s->offset, pid, 0);
		else if (is_session && !s->is_free)
			fds[nfds++] = link_multi(prog_session, ATTACH_UPROBE_SESSION, s->path, &s->offset, 1, pid, 0);
		else fds[nfds++] = link_multi(prog_entry, ATTACH_UPROBE_MULTI, s->path, &s->offset, 1, pid, 0);
		if (is_uret && !s->is_free)
			fds[nfds++] = link_multi(prog_entry, ATTACH_UPROBE_MULTI, s->path, &s->offset, 1, pid, UPROBE_MULTI_RETURN);
		if (fds[nfds - 1] < 0) return 1;
	}
	printf("attached %d sites (%s)\n", nsites, kind);
	fflush(stdout);
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	while (!stop && kill(pid, 0) == 0) usleep(50 * 1000);
	for (int i = 0; i < nfds; i++) close(fds[i]);
	return 0;
usage:
	fprintf(stderr, "usage: probe_cost -p PID [-k multi|session|uretprobe|perf] SITE... (SITE = symbol[+offset] or auto, at most %d)\n", MAX_SITES);
	return 2;
}
