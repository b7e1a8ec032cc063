/* libmemtraced_sampler.so (user/sampler) loaded into this very process, as memtraced --inject
 * will: dlopen, semaphores raised by hand (then by the kernel, through a perf uprobe with a
 * ref_ctr_offset, the way a USDT tracer does), start at rate 1, and exact counts for every
 * wrapped function this program can call, 8 threads, realloc, a dlopen'ed plugin, semaphore 0,
 * stop putting this program's own GOT back, the statistics at a rate, and the SDT notes. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "../../user/sampler/sampler.h"
#include "check.h"

/* C++ operators, called from C (the test is linked with libstdc++): through this program's GOT. */
void *_Znwm(size_t);
void *_Znam(size_t);
void *_ZnwmRKSt9nothrow_t(size_t, const void *);
void *_ZnwmSt11align_val_t(size_t, size_t);
void *_ZnamSt11align_val_t(size_t, size_t);
void _ZdlPv(void *);
void _ZdaPv(void *);
void _ZdlPvm(void *, size_t);
void _ZdlPvRKSt9nothrow_t(void *, const void *);
void _ZdlPvSt11align_val_t(void *, size_t);
void _ZdaPvSt11align_val_t(void *, size_t);
extern const char _ZSt7nothrow[];

static struct memtraced_sampler_stats *st, base;
static struct memtraced_sampler_check *ck;
static long (*sampler_start)(unsigned long, unsigned long);
static long (*sampler_stop)(void);
static long (*sampler_version)(void);
static void (*thread_counts)(unsigned long[3]);
static volatile unsigned short *sem_alloc, *sem_free;
static void *volatile sink;
static char lib_path[PATH_MAX];
static bool jemalloc_run; /* the child run with jemalloc preloaded */
/* Under `make test SANITIZE=1`: AddressSanitizer intercepts dlopen (glibc then sees its
 * runtime as the caller) and must be the first object loaded (no jemalloc preloaded ahead). */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif
#define JEMALLOC_LIB "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

#define D(field) (st->field - base.field)
#define SNAP() (base = *st)

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && b[0] ? b : "build";
}

/* This program's own GOT slot for name (JUMP_SLOT or GLOB_DAT), read by its own walk. */
struct slot_query {
	const char *name;
	uintptr_t *slot;
};

static int find_own_slot(struct dl_phdr_info *info, size_t size, void *data)
{
	struct slot_query *q = data;
	const ElfW(Dyn) *d = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			d = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	uintptr_t b = info->dlpi_addr, sym = 0, str = 0, rel[2] = { 0, 0 };
	size_t n[2] = { 0, 0 };
	for (; d && d->d_tag != DT_NULL; d++) {
		uintptr_t v = d->d_un.d_ptr < b ? d->d_un.d_ptr + b : d->d_un.d_ptr;
		switch (d->d_tag) {
		case DT_SYMTAB: sym = v; break;
		case DT_STRTAB: str = v; break;
		case DT_JMPREL: rel[0] = v; break;
		case DT_PLTRELSZ: n[0] = d->d_un.d_val / sizeof(ElfW(Rela)); break;
		case DT_RELA: rel[1] = v; break;
		case DT_RELASZ: n[1] = d->d_un.d_val / sizeof(ElfW(Rela)); break;
		}
	}
	for (int k = 0; k < 2 && sym && str; k++)
		for (size_t i = 0; rel[k] && i < n[k]; i++) {
			const ElfW(Rela) *r = (const ElfW(Rela) *)rel[k] + i;
			const ElfW(Sym) *s = (const ElfW(Sym) *)sym + ELF64_R_SYM(r->r_info);
			if (ELF64_R_SYM(r->r_info) && strcmp((const char *)str + s->st_name, q->name) == 0)
				q->slot = (uintptr_t *)(b + r->r_offset);
		}
	return 1; /* the main program only */
}

static uintptr_t *own_slot(const char *name)
{
	struct slot_query q = { name, NULL };
	dl_iterate_phdr(find_own_slot, &q);
	return q.slot;
}

static bool in_sampler(uintptr_t addr)
{
	Dl_info di;
	return dladdr((void *)addr, &di) && di.dli_fname && strstr(di.dli_fname, "libmemtraced_sampler");
}

static bool load_sampler(void)
{
	char rel[PATH_MAX];
	snprintf(rel, sizeof rel, "%s/lib/libmemtraced_sampler.so", build_dir());
	if (!realpath(rel, lib_path)) {
		printf("FAIL sampler_loads: %s not built\n", rel);
		return false;
	}
	void *h = dlopen(lib_path, RTLD_NOW);
	CHECKF("sampler_loads", h != NULL, "%s", dlerror());
	if (!h)
		return false;
	sampler_start = (long (*)(unsigned long, unsigned long))dlsym(h, "memtraced_sampler_start");
	sampler_stop = (long (*)(void))dlsym(h, "memtraced_sampler_stop");
	sampler_version = (long (*)(void))dlsym(h, "memtraced_sampler_version");
	thread_counts = (void (*)(unsigned long[3]))dlsym(h, "memtraced_sampler_thread_counts");
	st = dlsym(h, "memtraced_sampler_stats");
	ck = dlsym(h, "memtraced_sampler_check");
	sem_alloc = dlsym(h, "otel_memory_alloc_semaphore");
	sem_free = dlsym(h, "otel_memory_free_semaphore");
	bool all = sampler_start && sampler_stop && sampler_version && thread_counts && st &&
		   sem_alloc && sem_free;
	CHECK("sampler_exports_its_api", all);
	if (all)
		CHECK("sampler_version_matches", sampler_version() == MEMTRACED_SAMPLER_VERSION);
	return all;
}

/* One allocation function at rate 1: one sample of (size+7)/8 points, counted on alloc_fn,
 * its free counted on free_fn and nowhere else (no nested double count). */
static void expect_pair(const char *name, int alloc_fn, int free_fn, size_t size, void *p,
			void (*release)(void *, size_t))
{
	char n[128];
	uint64_t allocs = D(allocs_by_fn[alloc_fn]), samples = D(samples), pts = D(nsamples);
	snprintf(n, sizeof n, "sampler_rate1_%s_counted_once", name);
	CHECKF(n, p && allocs == 1 && samples == 1 && pts == (size + 7) / 8 &&
		  D(usdt_allocs) == 1,
	       "p=%p allocs_by_fn=%lu samples=%lu nsamples=%lu (want %zu) usdt=%lu", p,
	       (unsigned long)allocs, (unsigned long)samples, (unsigned long)pts, (size + 7) / 8,
	       D(usdt_allocs));
	SNAP();
	release(p, size);
	snprintf(n, sizeof n, "sampler_rate1_%s_free_counted_once", name);
	CHECKF(n, D(frees_by_fn[free_fn]) == 1 && D(sampled_frees) == 1 && D(usdt_frees) == 1,
	       "frees_by_fn=%lu sampled_frees=%lu usdt_frees=%lu", D(frees_by_fn[free_fn]),
	       D(sampled_frees), D(usdt_frees));
}

static void rel_free(void *p, size_t s) { free(p); }
static void rel_delete(void *p, size_t s) { _ZdlPv(p); }
static void rel_delete_array(void *p, size_t s) { _ZdaPv(p); }
static void rel_delete_sized(void *p, size_t s) { _ZdlPvm(p, s); }
static void rel_delete_nothrow(void *p, size_t s) { _ZdlPvRKSt9nothrow_t(p, _ZSt7nothrow); }
static void rel_delete_aligned(void *p, size_t s) { _ZdlPvSt11align_val_t(p, 64); }
static void rel_delete_array_aligned(void *p, size_t s) { _ZdaPvSt11align_val_t(p, 64); }

#define PAIR(name, afn, ffn, size, expr, rel) \
	do { SNAP(); void *p_ = (expr); sink = p_; expect_pair(name, afn, ffn, size, p_, rel); } while (0)

static void every_function(void)
{
	PAIR("malloc", MTS_MALLOC, MTS_FREE, 100, malloc(100), rel_free);
	PAIR("calloc", MTS_CALLOC, MTS_FREE, 120, calloc(3, 40), rel_free);
	void *volatile null = NULL; /* realloc(NULL, n) would be compiled as malloc(n) */
	PAIR("realloc_null", MTS_REALLOC, MTS_FREE, 24, realloc(null, 24), rel_free);
	if (!jemalloc_run) /* jemalloc has no reallocarray nor pvalloc: glibc's would mix heaps */
		PAIR("reallocarray_null", MTS_REALLOCARRAY, MTS_FREE, 40, reallocarray(null, 5, 8),
		     rel_free);
	void *pm = NULL;
	PAIR("posix_memalign", MTS_POSIX_MEMALIGN, MTS_FREE, 200,
	     (posix_memalign(&pm, 64, 200) == 0 ? pm : NULL), rel_free);
	PAIR("aligned_alloc", MTS_ALIGNED_ALLOC, MTS_FREE, 128, aligned_alloc(64, 128), rel_free);
	PAIR("memalign", MTS_MEMALIGN, MTS_FREE, 72, memalign(32, 72), rel_free);
	PAIR("valloc", MTS_VALLOC, MTS_FREE, 100, valloc(100), rel_free);
	if (!jemalloc_run)
		PAIR("pvalloc", MTS_PVALLOC, MTS_FREE, 100, pvalloc(100), rel_free);
	/* operator new calls malloc through libstdc++'s GOT, delete calls free: counted once */
	PAIR("new", MTS_NEW, MTS_DELETE, 56, _Znwm(56), rel_delete);
	PAIR("new_array", MTS_NEW_ARRAY, MTS_DELETE_ARRAY, 80, _Znam(80), rel_delete_array);
	PAIR("new_nothrow", MTS_NEW_NOTHROW, MTS_DELETE_NOTHROW, 33,
	     _ZnwmRKSt9nothrow_t(33, _ZSt7nothrow), rel_delete_nothrow);
	PAIR("new_sized_delete", MTS_NEW, MTS_DELETE_SIZED, 48, _Znwm(48), rel_delete_sized);
	PAIR("new_aligned", MTS_NEW_ALIGNED, MTS_DELETE_ALIGNED, 256, _ZnwmSt11align_val_t(256, 64),
	     rel_delete_aligned);
	PAIR("new_array_aligned", MTS_NEW_ARRAY_ALIGNED, MTS_DELETE_ARRAY_ALIGNED, 96,
	     _ZnamSt11align_val_t(96, 64), rel_delete_array_aligned);
	SNAP();
	free(NULL);
	_ZdlPv(NULL);
	CHECK("sampler_free_null_passes_through", D(sampled_frees) == 0);
}

static void realloc_cases(void *before_start)
{
	/* a sampled block: free of the old one, then a new allocation of the new size */
	void *p = malloc(40);
	SNAP();
	void *q = realloc(p, 4000);
	sink = q;
	CHECKF("sampler_realloc_sampled_block", q && D(frees_by_fn[MTS_REALLOC]) == 1 &&
	       D(allocs_by_fn[MTS_REALLOC]) == 1 && D(nsamples) == 500,
	       "frees=%lu allocs=%lu nsamples=%lu", D(frees_by_fn[MTS_REALLOC]),
	       D(allocs_by_fn[MTS_REALLOC]), D(nsamples));
	/* a block from before start: no free fired, the result sampled */
	SNAP();
	void *r = realloc(before_start, 100);
	sink = r;
	CHECKF("sampler_realloc_unsampled_block", r && D(frees_by_fn[MTS_REALLOC]) == 0 &&
	       D(sampled_frees) == 0 && D(allocs_by_fn[MTS_REALLOC]) == 1,
	       "frees=%lu allocs=%lu", D(frees_by_fn[MTS_REALLOC]), D(allocs_by_fn[MTS_REALLOC]));
	/* a failed resize: the sampled block is put back, and its later free is seen */
	SNAP();
	void *volatile kept = q; /* still valid after the failed resize */
	void *fail = realloc(kept, SIZE_MAX / 2);
	CHECKF("sampler_realloc_failure_keeps_block", fail == NULL && D(realloc_failed) == 1 &&
	       D(allocs_by_fn[MTS_REALLOC]) == 0 && D(usdt_allocs) == 1,
	       "fail=%p realloc_failed=%lu", fail, D(realloc_failed));
	SNAP();
	free(kept);
	free(r);
	CHECKF("sampler_realloc_results_freed", D(frees_by_fn[MTS_FREE]) == 2,
	       "frees_by_fn[free]=%lu", D(frees_by_fn[MTS_FREE]));
}

#define NTHREADS 8
#define PER_THREAD 2000
struct thread_result {
	int index;
	unsigned long counts[3];
};

static void *thread_main(void *arg)
{
	struct thread_result *r = arg;
	size_t size = 16 * (r->index + 1);
	/* what the thread's start allocated (a sanitizer's runtime does) is not the loop's */
	unsigned long before[3];
	thread_counts(before);
	for (int i = 0; i < PER_THREAD; i++) {
		void *p = malloc(size);
		sink = p;
		free(p);
	}
	thread_counts(r->counts);
	for (int k = 0; k < 3; k++) r->counts[k] -= before[k];
	return NULL;
}

static void threads(void)
{
	pthread_t th[NTHREADS];
	struct thread_result res[NTHREADS];
	SNAP();
	for (int i = 0; i < NTHREADS; i++) {
		res[i].index = i;
		pthread_create(&th[i], NULL, thread_main, &res[i]);
	}
	bool exact = true;
	unsigned long pts = 0;
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		unsigned long want_pts = (unsigned long)PER_THREAD * 2 * (i + 1);
		pts += want_pts;
		if (res[i].counts[0] != PER_THREAD || res[i].counts[1] != PER_THREAD ||
		    res[i].counts[2] != want_pts) {
			exact = false;
			printf("# thread %d: allocs %lu frees %lu nsamples %lu (want %d %d %lu)\n", i,
			       res[i].counts[0], res[i].counts[1], res[i].counts[2], PER_THREAD,
			       PER_THREAD, want_pts);
		}
	}
	CHECK("sampler_8_threads_exact_per_thread", exact);
	CHECKF("sampler_8_threads_totals", D(samples) >= NTHREADS * PER_THREAD &&
	       D(nsamples) >= pts && D(set_full) == 0,
	       "samples=%lu nsamples=%lu set_full=%lu", D(samples), D(nsamples), D(set_full));
}

static void jemalloc_api(void *h);

static void plugin(void)
{
	char rel[PATH_MAX], path[PATH_MAX];
	snprintf(rel, sizeof rel, "%s/tests/plugins/libsampler_plugin.so", build_dir());
	if (!realpath(rel, path)) {
		printf("FAIL sampler_dlopen_plugin_counted: %s not built\n", rel);
		return;
	}
	SNAP();
	void *h = dlopen(path, RTLD_LAZY); /* its jemalloc calls resolve only under jemalloc */
	void *(*palloc)(size_t) = h ? (void *(*)(size_t))dlsym(h, "sampler_plugin_alloc") : NULL;
	void (*pfree)(void *) = h ? (void (*)(void *))dlsym(h, "sampler_plugin_free") : NULL;
	if (!palloc || !pfree) {
		printf("FAIL sampler_dlopen_plugin_counted: %s\n", dlerror());
		return;
	}
	CHECKF("sampler_dlopen_patches_new_object", D(slots_patched) >= 2 && D(walks) >= 1,
	       "slots_patched=%lu walks=%lu", D(slots_patched), D(walks));
	SNAP();
	void *p = palloc(200);
	sink = p;
	pfree(p);
	CHECKF("sampler_dlopen_plugin_counted", D(allocs_by_fn[MTS_MALLOC]) == 1 &&
	       D(nsamples) == 25 && D(frees_by_fn[MTS_FREE]) == 1,
	       "allocs=%lu nsamples=%lu frees=%lu", D(allocs_by_fn[MTS_MALLOC]), D(nsamples),
	       D(frees_by_fn[MTS_FREE]));

	/* A bare name dlopen'ed by the plugin is found through the plugin's own RUNPATH: the
	 * wrapper left glibc the caller's return address. Its objects are patched by the
	 * sampler's walker thread, a few ms later (never on whichever thread takes a slow path:
	 * issue 34). */
	void *(*pdlopen)(const char *) = (void *(*)(const char *))dlsym(h, "sampler_plugin_dlopen");
	void *leaf = pdlopen && !UNDER_ASAN ? pdlopen("libsampler_plugin_leaf.so") : NULL;
	if (UNDER_ASAN)
		printf("SKIP sampler_dlopen_keeps_callers_runpath: AddressSanitizer intercepts dlopen, "
		       "glibc sees its runtime as the caller\n");
	else
		CHECKF("sampler_dlopen_keeps_callers_runpath", leaf != NULL, "%s", dlerror());
	if (leaf) {
		void *(*lalloc)(size_t) = (void *(*)(size_t))dlsym(leaf, "sampler_plugin_alloc");
		for (int i = 0; i < 3000; i++) { /* until the walker's walk (2 ms after the dlopen) */
			SNAP();
			void *q = lalloc(64);
			sink = q;
			free(q);
			if (D(allocs_by_fn[MTS_MALLOC]) == 1) break;
			usleep(1000);
		}
		CHECKF("sampler_dlopen_leaf_patched_by_the_walker",
		       D(allocs_by_fn[MTS_MALLOC]) == 1 && D(nsamples) == 8,
		       "allocs=%lu nsamples=%lu", D(allocs_by_fn[MTS_MALLOC]), D(nsamples));
	}
	if (jemalloc_run)
		jemalloc_api(h);
}

/* Allocation functions looked up with dlsym after the start lead to the wrappers (issue 47:
 * 0 of 1000 calls through dlsym(RTLD_DEFAULT, "malloc") were seen); RTLD_NEXT (an interposer
 * looking for the next malloc) and other names are left to the real dlsym. */
static void dlsym_lookups(void)
{
	void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
	SNAP();
	void *p = m ? m(100) : NULL;
	sink = p;
	free(p);
	CHECKF("sampler_dlsym_default_malloc_counted", m && in_sampler((uintptr_t)m) &&
	       D(allocs_by_fn[MTS_MALLOC]) == 1 && D(frees_by_fn[MTS_FREE]) == 1,
	       "malloc %p (in the sampler: %d), allocs %lu, frees %lu", (void *)m,
	       m && in_sampler((uintptr_t)m), D(allocs_by_fn[MTS_MALLOC]), D(frees_by_fn[MTS_FREE]));
	void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	void *f = libc ? dlsym(libc, "free") : NULL;
	void *v = dlvsym(RTLD_DEFAULT, "calloc", "GLIBC_2.2.5");
	/* under jemalloc, libc's free and calloc@GLIBC_2.2.5 are not the functions the wrappers
	 * call (jemalloc's): left as they are */
	CHECKF("sampler_dlsym_handle_and_dlvsym_wrapped", f && v &&
	       in_sampler((uintptr_t)f) == !jemalloc_run && in_sampler((uintptr_t)v) == !jemalloc_run,
	       "free %p, calloc %p", f, v);
	if (libc)
		dlclose(libc);
	void *next = dlsym(RTLD_NEXT, "malloc"), *pr = dlsym(RTLD_DEFAULT, "printf");
	CHECKF("sampler_dlsym_next_and_others_untouched", next && !in_sampler((uintptr_t)next) &&
	       pr == (void *)printf, "next malloc %p, printf %p (%p)", next, pr, (void *)printf);
}

/* jemalloc's *allocx API through the plugin's GOT (the test run with jemalloc preloaded). */
static void jemalloc_api(void *h)
{
	void *(*mx)(size_t) = (void *(*)(size_t))dlsym(h, "sampler_plugin_mallocx");
	void *(*rx)(void *, size_t) = (void *(*)(void *, size_t))dlsym(h, "sampler_plugin_rallocx");
	size_t (*xx)(void *, size_t) = (size_t (*)(void *, size_t))dlsym(h, "sampler_plugin_xallocx");
	void (*dx)(void *) = (void (*)(void *))dlsym(h, "sampler_plugin_dallocx");
	void (*sdx)(void *, size_t) = (void (*)(void *, size_t))dlsym(h, "sampler_plugin_sdallocx");
	SNAP();
	void *p = mx(100);
	CHECKF("sampler_mallocx_counted", p && D(allocs_by_fn[MTS_MALLOCX]) == 1 && D(nsamples) == 13,
	       "allocs=%lu nsamples=%lu", D(allocs_by_fn[MTS_MALLOCX]), D(nsamples));
	SNAP();
	p = rx(p, 300);
	CHECKF("sampler_rallocx_counted", p && D(frees_by_fn[MTS_RALLOCX]) == 1 &&
	       D(allocs_by_fn[MTS_RALLOCX]) == 1, "frees=%lu allocs=%lu",
	       D(frees_by_fn[MTS_RALLOCX]), D(allocs_by_fn[MTS_RALLOCX]));
	SNAP();
	size_t usable = xx(p, 300); /* in place: a free and an allocation at the same address */
	CHECKF("sampler_xallocx_counted", usable >= 300 && D(frees_by_fn[MTS_XALLOCX]) == 1 &&
	       D(allocs_by_fn[MTS_XALLOCX]) == 1, "usable=%zu frees=%lu allocs=%lu", usable,
	       D(frees_by_fn[MTS_XALLOCX]), D(allocs_by_fn[MTS_XALLOCX]));
	SNAP();
	dx(p);
	p = mx(64);
	sdx(p, 64);
	CHECKF("sampler_dallocx_sdallocx_counted", D(frees_by_fn[MTS_DALLOCX]) == 1 &&
	       D(frees_by_fn[MTS_SDALLOCX]) == 1, "dallocx=%lu sdallocx=%lu",
	       D(frees_by_fn[MTS_DALLOCX]), D(frees_by_fn[MTS_SDALLOCX]));
}

/* A forked child inherits the started sampler: its allocations are counted in its copy. */
static void forked_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		unsigned long c0[3], c1[3];
		thread_counts(c0);
		for (int i = 0; i < 10; i++) {
			void *p = malloc(80);
			sink = p;
			free(p);
		}
		thread_counts(c1);
		_exit(c1[0] - c0[0] == 10 && c1[1] - c0[1] == 10 && c1[2] - c0[2] == 100 ? 0 : 1);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	CHECKF("sampler_fork_child_counts", pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child status %d", status);
}

static void semaphore_zero(void)
{
	void *kept = malloc(64); /* sampled while the semaphores are up */
	sink = kept;
	*sem_alloc = 0;
	*sem_free = 0;
	SNAP();
	for (int i = 0; i < 100; i++) {
		void *p = malloc(100 + i);
		sink = p;
		p = realloc(p, 300);
		free(p);
		p = _Znwm(40);
		_ZdlPv(p);
	}
	CHECKF("sampler_semaphore_0_passes_through", D(samples) == 0 && D(calls) == 0 &&
	       D(usdt_allocs) == 0 && D(sampled_frees) == 0,
	       "samples=%lu calls=%lu usdt=%lu frees=%lu", D(samples), D(calls), D(usdt_allocs),
	       D(sampled_frees));
	SNAP();
	free(kept);
	CHECKF("sampler_semaphore_0_free_drops_block_silently", D(sampled_frees) == 1 &&
	       D(usdt_frees) == 0, "sampled_frees=%lu usdt_frees=%lu", D(sampled_frees),
	       D(usdt_frees));
	*sem_alloc = 1;
	*sem_free = 1;
}

/* Issue 47: started, with no tracer on the alloc probe (memtraced killed: the kernel dropped
 * the semaphore), the sampler puts the GOT back by itself after SAMPLER_LAPSE_NS, looking on
 * its pass-through calls; not before it. */
static void lapse(uintptr_t *slot, uintptr_t old)
{
	*sem_alloc = 1;
	*sem_free = 1;
	long n = sampler_start(4096, MEMTRACED_SAMPLER_LEASED); /* as memtraced starts it */
	*sem_alloc = 0; /* the tracer is gone */
	*sem_free = 0;
	unsigned long lapsed = st->lapsed;
	for (int i = 0; i < 3 * MEMTRACED_SAMPLER_IDLE_CALLS; i++) {
		sink = malloc(32);
		free(sink);
	}
	CHECKF("sampler_no_lapse_before_its_time", n > 0 && slot && in_sampler(*slot) &&
	       st->lapsed == lapsed, "start %ld, lapsed %lu", n, st->lapsed - lapsed);
	struct timespec wait = {2, 100000000}; /* past SAMPLER_LAPSE_NS */
	nanosleep(&wait, NULL);
	for (int i = 0; i < 3 * MEMTRACED_SAMPLER_IDLE_CALLS; i++) {
		sink = malloc(32);
		free(sink);
	}
	CHECKF("sampler_lapses_without_a_tracer", st->lapsed == lapsed + 1 && slot && *slot == old,
	       "lapsed %lu, slot %p, was %p", st->lapsed - lapsed, slot ? (void *)*slot : NULL,
	       (void *)old);
	n = sampler_start(4096, MEMTRACED_SAMPLER_LEASED); /* a later memtraced starts it again */
	CHECKF("sampler_start_after_lapse", n > 0 && in_sampler(*slot), "start %ld", n);
	*sem_alloc = 1;
	sampler_stop();
	/* a program's own start (a carried sampler) waits for its tracer as long as it likes */
	n = sampler_start(4096, 0);
	*sem_alloc = 0;
	lapsed = st->lapsed;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 3 * MEMTRACED_SAMPLER_IDLE_CALLS; i++) {
			sink = malloc(32);
			free(sink);
		}
		if (!round) nanosleep(&wait, NULL);
	}
	CHECKF("sampler_own_start_never_lapses", n > 0 && st->lapsed == lapsed && in_sampler(*slot),
	       "lapsed %lu", st->lapsed - lapsed);
	*sem_alloc = 1;
	sampler_stop();
}

/* At mean gap 4096: the sum of nsamples * gap estimates the bytes allocated (Poisson: ~16k
 * samples for 64 MiB, a standard error under 1%). */
static void rate_statistics(void)
{
	long n = sampler_start(4096, 0);
	CHECKF("sampler_restart_updates_rate", n >= 0, "start returned %ld", n);
	unsigned long c0[3], c1[3];
	thread_counts(c0);
	uint64_t bytes = 0, x = 88172645463325252ULL;
	while (bytes < (64u << 20)) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		size_t size = 1 + x % 8192;
		void *p = malloc(size);
		sink = p;
		free(p);
		bytes += size;
	}
	thread_counts(c1);
	double est = (double)(c1[2] - c0[2]) * 4096, err = est / (double)bytes - 1;
	printf("# rate: %lu bytes, %lu samples, estimate %.0f (%.2f%%)\n", (unsigned long)bytes,
	       c1[2] - c0[2], est, err * 100);
	CHECKF("sampler_rate_estimate_within_4pct", err > -0.04 && err < 0.04, "error %.2f%%",
	       err * 100);
}

/* The SDT notes, read from the file as a USDT tracer (libbpf) reads them. */
struct sdt_probe {
	char name[16], args[64];
	uint64_t pc, sema, pc_off, sema_off; /* link-time addresses, file offsets */
	bool found;
};

static uint64_t file_offset(const Elf64_Ehdr *eh, uint64_t vaddr, bool want_exec)
{
	const Elf64_Phdr *ph = (const void *)((const char *)eh + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr &&
		    vaddr < ph[i].p_vaddr + ph[i].p_memsz && !!(ph[i].p_flags & PF_X) == want_exec)
			return vaddr - ph[i].p_vaddr + ph[i].p_offset;
	return 0;
}

static bool read_notes(const char *path, struct sdt_probe probes[2], char **image, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	fseek(f, 0, SEEK_END);
	*len = ftell(f);
	fseek(f, 0, SEEK_SET);
	*image = malloc(*len);
	bool ok = *image && fread(*image, 1, *len, f) == *len;
	fclose(f);
	if (!ok)
		return false;
	const Elf64_Ehdr *eh = (const void *)*image;
	const Elf64_Shdr *sh = (const void *)(*image + eh->e_shoff);
	const char *shstr = *image + sh[eh->e_shstrndx].sh_offset;
	const Elf64_Shdr *notes = NULL;
	uint64_t base_addr = 0;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (strcmp(shstr + sh[i].sh_name, ".note.stapsdt") == 0) notes = &sh[i];
		if (strcmp(shstr + sh[i].sh_name, ".stapsdt.base") == 0) base_addr = sh[i].sh_addr;
	}
	if (!notes || !base_addr)
		return false;
	for (size_t off = 0; off + sizeof(Elf64_Nhdr) <= notes->sh_size;) {
		const Elf64_Nhdr *nh = (const void *)(*image + notes->sh_offset + off);
		const char *owner = (const char *)(nh + 1);
		const char *desc = owner + ((nh->n_namesz + 3) & ~3u);
		off += sizeof(*nh) + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
		if (nh->n_type != 3 || strcmp(owner, "stapsdt") != 0)
			continue;
		uint64_t a[3];
		memcpy(a, desc, sizeof a);
		const char *prov = desc + 24, *name = prov + strlen(prov) + 1;
		const char *args = name + strlen(name) + 1;
		int k = strcmp(name, "alloc") == 0 ? 0 : strcmp(name, "free") == 0 ? 1 : -1;
		if (k < 0 || strcmp(prov, "otel_memory") != 0 || a[1] != base_addr)
			continue;
		struct sdt_probe *p = &probes[k];
		snprintf(p->name, sizeof p->name, "%s", name);
		snprintf(p->args, sizeof p->args, "%s", args);
		p->pc = a[0];
		p->sema = a[2];
		p->pc_off = file_offset(eh, a[0], true);
		p->sema_off = file_offset(eh, a[2], false);
		p->found = p->pc_off && p->sema_off;
	}
	return true;
}

static int open_usdt(uint64_t pc_off, uint64_t sema_off)
{
	int type = 0;
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	if (!f || fscanf(f, "%d", &type) != 1)
		type = -1;
	if (f)
		fclose(f);
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = type;
	a.config = sema_off << 32; /* the uprobe PMU's ref_ctr_offset: config:32-63 */
	a.uprobe_path = (uintptr_t)lib_path;
	a.probe_offset = pc_off;
	return (int)syscall(__NR_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static uint64_t read_count(int fd)
{
	uint64_t c = 0;
	return read(fd, &c, sizeof c) == sizeof c ? c : ~0ULL;
}

static void sdt_notes(void)
{
	struct sdt_probe pr[2];
	memset(pr, 0, sizeof pr);
	char *image = NULL;
	size_t len = 0;
	bool read_ok = read_notes(lib_path, pr, &image, &len);
	CHECKF("sampler_sdt_notes_parse", read_ok && pr[0].found && pr[1].found &&
	       strcmp(pr[0].args, "8@%rdi 8@%rsi 8@%rdx") == 0 && strcmp(pr[1].args, "8@%rdi") == 0,
	       "alloc found %d args '%s', free found %d args '%s'", pr[0].found, pr[0].args,
	       pr[1].found, pr[1].args);
	Dl_info di;
	bool mem = dladdr((void *)sampler_start, &di) != 0;
	static const unsigned char nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	for (int k = 0; k < 2 && read_ok && mem; k++) {
		char n[64];
		snprintf(n, sizeof n, "sampler_sdt_%s_is_5_byte_nop", k ? "free" : "alloc");
		CHECK(n, pr[k].found && pr[k].pc_off + 5 <= len &&
		      memcmp(image + pr[k].pc_off, nop5, 5) == 0 &&
		      memcmp((char *)di.dli_fbase + pr[k].pc, nop5, 5) == 0);
		snprintf(n, sizeof n, "sampler_sdt_%s_semaphore_address", k ? "free" : "alloc");
		CHECK(n, (uintptr_t)di.dli_fbase + pr[k].sema ==
			 (uintptr_t)(k ? sem_free : sem_alloc));
	}
	free(image);
	char cmd[PATH_MAX + 64], line[512];
	snprintf(cmd, sizeof cmd, "readelf -n '%s'", lib_path);
	FILE *p = popen(cmd, "r");
	int names = 0, provider = 0;
	while (p && fgets(line, sizeof line, p)) {
		provider += strstr(line, "Provider: otel_memory") != NULL;
		names += strstr(line, "Name: alloc") != NULL || strstr(line, "Name: free") != NULL;
	}
	if (p)
		pclose(p);
	CHECKF("sampler_readelf_lists_probes", provider == 2 && names == 2,
	       "readelf -n: %d providers, %d names", provider, names);

	/* A tracer's uprobe with a ref_ctr offset raises the semaphore, counts every sampled
	 * allocation and free at the probe sites, and drops the semaphore when it goes. */
	if (!pr[0].found || !pr[1].found)
		return;
	*sem_alloc = 0;
	*sem_free = 0;
	int fa = open_usdt(pr[0].pc_off, pr[0].sema_off), ff = open_usdt(pr[1].pc_off, pr[1].sema_off);
	CHECKF("sampler_usdt_uprobe_attaches", fa >= 0 && ff >= 0, "perf_event_open: %s",
	       strerror(errno));
	if (fa < 0 || ff < 0)
		return;
	CHECKF("sampler_kernel_raises_semaphores", *sem_alloc == 1 && *sem_free == 1,
	       "alloc %u free %u", *sem_alloc, *sem_free);
	uint64_t a0 = read_count(fa), f0 = read_count(ff);
	for (int i = 0; i < 10; i++) {
		void *q = malloc(100);
		sink = q;
		free(q);
	}
	uint64_t a1 = read_count(fa), f1 = read_count(ff);
	CHECKF("sampler_usdt_hits_exact", a1 - a0 == 10 && f1 - f0 == 10,
	       "alloc hits %lu, free hits %lu", (unsigned long)(a1 - a0), (unsigned long)(f1 - f0));
	close(fa);
	close(ff);
	CHECKF("sampler_kernel_drops_semaphores", *sem_alloc == 0 && *sem_free == 0,
	       "alloc %u free %u", *sem_alloc, *sem_free);
	*sem_alloc = 1;
	*sem_free = 1;
}

/* The same checks in a child with jemalloc preloaded, its lines renamed jemalloc_*. */
static void jemalloc_child(const char *self)
{
	if (UNDER_ASAN) {
		printf("SKIP sampler_jemalloc_run: AddressSanitizer must be the first object loaded, "
		       "jemalloc cannot be preloaded ahead of it\n");
		return;
	}
	if (access(JEMALLOC_LIB, R_OK) != 0) {
		printf("FAIL sampler_jemalloc_run: %s missing (libjemalloc2 is in DEPS_TEST)\n",
		       JEMALLOC_LIB);
		return;
	}
	char cmd[PATH_MAX + 128], line[1024];
	snprintf(cmd, sizeof cmd, "LD_PRELOAD=%s '%s' --jemalloc-child", JEMALLOC_LIB, self);
	FILE *p = popen(cmd, "r");
	int lines = 0;
	while (p && fgets(line, sizeof line, p)) {
		if (!strncmp(line, "PASS ", 5) || !strncmp(line, "FAIL ", 5)) {
			printf("%.5sjemalloc_%s", line, line + 5);
			check_failures += line[0] == 'F';
			lines++;
		} else {
			printf("# jemalloc: %s", line);
		}
	}
	int rc = p ? pclose(p) : -1;
	CHECKF("sampler_jemalloc_run", rc == 0 && lines > 50, "status %d, %d checks", rc, lines);
}

/* Under `make test SANITIZE=1`: a failed allocation must reach the sampler as NULL (the test of
 * realloc(SIZE_MAX / 2) above), where AddressSanitizer would abort instead. ASan reads this at
 * its start; other builds never call it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	jemalloc_run = argc > 1 && strcmp(argv[1], "--jemalloc-child") == 0;
	if (jemalloc_run)
		CHECK("sampler_jemalloc_is_the_allocator", dlsym(RTLD_DEFAULT, "mallocx") != NULL);
	if (!load_sampler())
		return CHECK_DONE();
	void *before = malloc(48), *before2 = malloc(4000);
	sink = before2;
	uintptr_t *slot = own_slot("malloc");
	uintptr_t old = slot ? *slot : 0;
	CHECK("sampler_test_finds_own_malloc_slot", slot != NULL && !in_sampler(old));
	CHECK("sampler_start_rejects_gap_0", sampler_start(0, 0) == -EINVAL);
	*sem_alloc = 1;
	*sem_free = 1;
	long n = sampler_start(0, MEMTRACED_SAMPLER_ALL_WORDS);
	CHECKF("sampler_start_redirects_slots", n > 0 && slot && in_sampler(*slot),
	       "start returned %ld, slot %p", n, slot ? (void *)*slot : NULL);
	CHECKF("sampler_start_again_is_idempotent", sampler_start(0, MEMTRACED_SAMPLER_ALL_WORDS) == 0,
	       "second start redirected slots again");
	every_function();
	realloc_cases(before);
	SNAP();
	free(before2);
	CHECK("sampler_block_from_before_start_no_free", D(sampled_frees) == 0 && D(usdt_frees) == 0);
	threads();
	plugin();
	dlsym_lookups();
	forked_child();
	semaphore_zero();
	sdt_notes();
	rate_statistics();
	unsigned long patched = st->slots_patched, restored = st->slots_restored;
	long r = sampler_stop();
	CHECKF("sampler_stop_restores_every_slot", r > 0 && (unsigned long)r == patched - restored &&
	       st->slots_lost == 0, "stop returned %ld, patched %lu, restored before %lu, lost %lu",
	       r, patched, restored, st->slots_lost);
	CHECKF("sampler_stop_own_malloc_slot_back", slot && *slot == old, "slot %p, was %p",
	       slot ? (void *)*slot : NULL, (void *)old);
	SNAP();
	void *p = malloc(100);
	sink = p;
	free(p);
	CHECK("sampler_inert_after_stop", D(samples) == 0 && D(sampled_frees) == 0);
	CHECK("sampler_dlsym_real_after_stop", !in_sampler((uintptr_t)dlsym(RTLD_DEFAULT, "malloc")));
	n = sampler_start(0, MEMTRACED_SAMPLER_ALL_WORDS);
	CHECKF("sampler_start_after_stop_repatches", n > 0 && in_sampler(*slot), "start %ld", n);
	CHECKF("sampler_check_finds_no_slot_missed", ck && ck->walks > 0 && ck->checked > 0 &&
	       ck->missed == 0, "checked %lu, missed %lu (first at 0x%lx)", ck ? ck->checked : 0,
	       ck ? ck->missed : 0, ck ? ck->missed_slot[0] : 0);
	for (int i = 0; ck && i < SAMPLER_CHECK_KEEP && i < (int)ck->missed; i++) {
		Dl_info di;
		if (dladdr((void *)ck->missed_slot[i], &di))
			printf("# missed slot 0x%lx in %s, holds %p\n", ck->missed_slot[i], di.dli_fname,
			       *(void **)ck->missed_slot[i]);
	}
	r = sampler_stop();
	CHECKF("sampler_second_stop_restores", r == n && *slot == old, "stop %ld start %ld", r, n);
	lapse(slot, old);
	printf("# slots patched %lu, foreign %lu, walks %lu, set_full %lu, stale %lu\n",
	       st->slots_patched, st->slots_foreign, st->walks, st->set_full, st->set_stale);
	if (!jemalloc_run)
		jemalloc_child(argv[0]);
	return CHECK_DONE();
}
