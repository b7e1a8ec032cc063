/* Probing the running kernel (kernel_probe.h). */
#include "kernel_probe.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/capability.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "uprobe_link.h"

static struct kernel_features feats;
static pthread_once_t probed = PTHREAD_ONCE_INIT;

static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* A uprobe_multi or session link type exists when creating one on "/" fails for the path
 * (EBADF: not a regular file, as libbpf's own probe does) rather than for the type (EINVAL). */
static bool has_link_type(int attach_type)
{
	struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = attach_type);
	int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "mt_probe", "GPL", insns, 2, &po);
	if (prog < 0)
		return false;
	uint64_t off = 0;
	char err[256];
	int fd = uprobe_multi_link_create(prog, attach_type, "/", &off, NULL, 1, 0, false, err,
	                                  sizeof err);
	int e = errno;
	if (fd >= 0) close(fd); /* never expected */
	close(prog);
	return fd < 0 && e == EBADF;
}

static bool has_helper(enum bpf_func_id id)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, id, NULL) == 1;
}

void kernel_lockdown_level(const char *text, char *out, size_t outlen)
{
	const char *b = strchr(text, '['), *e = b ? strchr(b, ']') : NULL;
	snprintf(out, outlen, "%.*s", b && e ? (int)(e - b - 1) : 0, b ? b + 1 : "");
}

/* What the kernel's lockdown file says (the kernel's own, not a target's); a test may give the
 * file's text instead (MEMTRACED_TEST_LOCKDOWN, e.g. "none integrity [confidentiality]"). */
static void read_lockdown(char *out, size_t outlen)
{
	char text[128] = "";
	const char *test = getenv("MEMTRACED_TEST_LOCKDOWN");
	FILE *f = test ? NULL : fopen("/sys/kernel/security/lockdown", "re");
	if (test) snprintf(text, sizeof text, "%s", test);
	if (f) {
		if (!fgets(text, sizeof text, f)) text[0] = 0;
		fclose(f);
	}
	kernel_lockdown_level(text, out, outlen);
}

/* Yama's ptrace scope (the kernel's own file); MEMTRACED_TEST_PTRACE_SCOPE gives it (tests). */
static int read_ptrace_scope(void)
{
	const char *test = getenv("MEMTRACED_TEST_PTRACE_SCOPE");
	if (test) return atoi(test);
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int scope = -1;
	if (f) {
		if (fscanf(f, "%d", &scope) != 1) scope = -1;
		fclose(f);
	}
	return scope;
}

static bool bpf_capable(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {0};
	if (syscall(SYS_capget, &h, d) != 0) return true; /* cannot tell: the loads will */
	uint64_t eff = (uint64_t)d[1].effective << 32 | d[0].effective;
	const uint64_t bpf = 1ULL << 39, perfmon = 1ULL << 38, sys_admin = 1ULL << CAP_SYS_ADMIN;
	return (eff & sys_admin) || ((eff & bpf) && (eff & perfmon));
}

static void probe(void)
{
	struct utsname u;
	if (uname(&u) == 0) snprintf(feats.release, sizeof feats.release, "%s", u.release);
	sscanf(feats.release, "%d.%d", &feats.major, &feats.minor);
	feats.btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
	libbpf_print_fn_t old = libbpf_set_print(quiet_libbpf);
	feats.ringbuf = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	feats.task_storage = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1;
	feats.current_task_btf = has_helper(BPF_FUNC_get_current_task_btf);
	feats.attach_cookie = has_helper(BPF_FUNC_get_attach_cookie);
	feats.task_pt_regs = has_helper(BPF_FUNC_task_pt_regs);
	feats.bpf_loop = has_helper(BPF_FUNC_loop);
	feats.find_vma = has_helper(BPF_FUNC_find_vma);
	feats.uprobe_multi = has_link_type(UPROBE_ATTACH_MULTI);
	feats.uprobe_session = feats.uprobe_multi && has_link_type(UPROBE_ATTACH_SESSION);
	feats.probe_read_kernel = has_helper(BPF_FUNC_probe_read_kernel);
	libbpf_set_print(old);
	feats.bpf_capable = bpf_capable();
	read_lockdown(feats.lockdown, sizeof feats.lockdown);
	feats.ptrace_scope = read_ptrace_scope();
	/* A flag of a seccomp ioctl cannot be tried without a notification to answer: by version */
	feats.seccomp_addfd_send = feats.major > 5 || (feats.major == 5 && feats.minor >= 14);
}

const struct kernel_features *kernel_features(void)
{
	pthread_once(&probed, probe);
	return &feats;
}

enum tracer_mode kernel_best_mode(void)
{
	const struct kernel_features *f = kernel_features();
	return f->uprobe_session ? TRACER_MODE_SESSION : f->uprobe_multi ? TRACER_MODE_MULTI
	                                                                 : TRACER_MODE_PERF;
}

bool kernel_has_mode(enum tracer_mode mode, const char **why)
{
	const struct kernel_features *f = kernel_features();
	*why = "";
	if (mode == TRACER_MODE_SESSION && !f->uprobe_session) {
		*why = "no session uprobes (6.13+)";
		return false;
	}
	if (mode == TRACER_MODE_MULTI && !f->uprobe_multi) {
		*why = "no uprobe_multi links (6.6+)";
		return false;
	}
	return true;
}

bool kernel_lacks(char *buf, size_t len)
{
	const struct kernel_features *f = kernel_features();
	const struct { bool have; const char *what; } need[] = {
		{f->btf, "BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF)"},
		{f->ringbuf, "BPF ring buffers (5.8+)"},
		{f->task_storage, "BPF task storage (5.11+)"},
		{f->current_task_btf, "bpf_get_current_task_btf (5.11+)"},
		{f->attach_cookie, "bpf_get_attach_cookie (5.15+)"},
		{f->task_pt_regs, "bpf_task_pt_regs (5.15+)"},
		{f->bpf_loop, "bpf_loop (5.17+)"},
		{f->find_vma, "bpf_find_vma (5.17+)"},
	};
	/* the true cause first: without the capabilities, or under lockdown, every probe below
	 * reads as missing */
	if (f->ptrace_scope >= 3) {
		snprintf(buf, len, "Yama's kernel.yama.ptrace_scope is %d: no process may trace "
			 "another, nor read its memory, root included; memtraced does both (it places its "
			 "sampler with ptrace, its broker reads its parser's requests from its memory): "
			 "it needs a scope of 2 or less, which takes a reboot once 3 is set", f->ptrace_scope);
		return true;
	}
	if (!f->bpf_capable) {
		snprintf(buf, len, "memtraced lacks the capabilities to load BPF programs: it needs "
			 "CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) besides CAP_SYS_PTRACE, or root with "
			 "its capabilities (its effective set has none of them)");
		return true;
	}
	if (!strcmp(f->lockdown, "confidentiality") || (f->ringbuf && !f->probe_read_kernel)) {
		snprintf(buf, len, "kernel %s is locked down (lockdown=%s, /sys/kernel/security/"
			 "lockdown): it withholds bpf_probe_read_kernel, which memtraced's BPF programs "
			 "need; lockdown=integrity (what Secure Boot gives) allows them",
			 f->release, f->lockdown[0] ? f->lockdown : "?");
		return true;
	}
	size_t n = 0;
	int missing = 0;
	buf[0] = 0;
	n += snprintf(buf + n, n < len ? len - n : 0, "kernel %s lacks ", f->release);
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
		if (need[i].have) continue;
		n += snprintf(buf + n, n < len ? len - n : 0, "%s%s", missing++ ? ", " : "", need[i].what);
	}
	if (!missing) {
		buf[0] = 0;
		return false;
	}
	snprintf(buf + n, n < len ? len - n : 0, ": memtraced needs Linux 5.17 or later, with BTF "
	         "(docs/kernels.md)");
	return true;
}

static enum tracer_attach run_attach;

void kernel_set_attach(enum tracer_attach a) { run_attach = a; }
enum tracer_attach kernel_attach(void) { return run_attach; }

int kernel_attach_mode(enum tracer_attach a, enum tracer_mode *mode, char *err, size_t errlen)
{
	char lacks[512];
	if (kernel_lacks(lacks, sizeof lacks)) {
		snprintf(err, errlen, "%s", lacks);
		return -1;
	}
	if (a == TRACER_ATTACH_AUTO) a = run_attach;
	static const enum tracer_mode asked[] = {
		[TRACER_ATTACH_SESSION] = TRACER_MODE_SESSION, [TRACER_ATTACH_MULTI] = TRACER_MODE_MULTI,
		[TRACER_ATTACH_PERF] = TRACER_MODE_PERF,
	};
	const char *why;
	if (a == TRACER_ATTACH_AUTO) {
		*mode = kernel_best_mode();
	} else if (!kernel_has_mode(*mode = asked[a], &why)) {
		snprintf(err, errlen, "--attach-mode %s: kernel %s has %s", tracer_mode_short(*mode),
		         kernel_features()->release, why);
		return -1;
	}
	return 0;
}

const char *tracer_mode_short(enum tracer_mode mode)
{
	return mode == TRACER_MODE_SESSION ? "session" : mode == TRACER_MODE_MULTI ? "multi"
	     : mode == TRACER_MODE_PERF ? "perf" : "usdt";
}

void kernel_mode_line(enum tracer_mode mode, bool forced, char *buf, size_t len)
{
	const struct kernel_features *f = kernel_features();
	const char *name = tracer_mode_name(mode);
	if (mode == TRACER_MODE_USDT) {
		snprintf(buf, len, "%s (kernel %s)", name, f->release);
	} else if (mode == TRACER_MODE_SESSION) {
		snprintf(buf, len, "%s (kernel %s: the fastest mode)", name, f->release);
	} else if (forced && kernel_best_mode() != mode) {
		snprintf(buf, len, "%s (kernel %s, as --attach-mode asked; %s would be faster)", name,
		         f->release, tracer_mode_short(kernel_best_mode()));
	} else {
		/* bench section modes (docs/kernels.md): a malloc/free pair under memtraced at the
		 * default rate, 10.6 us with session uprobes, 13.1-13.8 with a return probe on
		 * every call */
		snprintf(buf, len, "%s (kernel %d.%d has no session uprobes, 6.13+: a return probe on "
		         "every allocation call, about 1.2x the cost of a malloc/free pair; --inject "
		         "avoids it)", name, f->major, f->minor);
	}
}

const char *tracer_mode_name(enum tracer_mode mode)
{
	return mode == TRACER_MODE_SESSION ? "session uprobes"
	     : mode == TRACER_MODE_MULTI ? "uprobe_multi + return probes"
	     : mode == TRACER_MODE_PERF ? "perf-event uprobes + uretprobes"
	     : "in-process sampler (USDT)";
}
