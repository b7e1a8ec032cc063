/* Allocation wrappers: which frames an allocation is not attributed to (see heapview.h). */
#include "heapview.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The allocation functions themselves (memtraced's stacks start inside them). */
static const char *const alloc_functions[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "cfree", "reallocf",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc", "mallocx", "rallocx",
	"xallocx", "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
	"operator new*", "operator delete*",
	/* the system calls of anonymous mappings (memtraced's mapping records start there; an
	 * mprotect makes a reservation's range usable) */
	"mmap", "mmap64", "__mmap", "__mmap64", "mremap", "__mremap", "mprotect", "__mprotect", NULL,
};

const char *const hv_default_wrappers[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "cfree", "reallocf",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc", "mallocx", "rallocx",
	"xallocx", "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
	"operator new*", "operator delete*",
	"mmap", "mmap64", "__mmap", "__mmap64", "mremap", "__mremap", "mprotect", "__mprotect",
	/* libc's own copies */
	"strdup", "__strdup", "strndup", "__strndup", "wcsdup",
	/* git, binutils, gnulib */
	"xmalloc", "xcalloc", "xrealloc", "xstrdup", "xstrndup", "xmemdupz", "xzalloc", "xmallocz",
	/* redis */
	"zmalloc*", "zcalloc*", "zrealloc*", "ztrymalloc*", "ztrycalloc*", "ztryrealloc*", "zstrdup",
	/* perl */
	"Perl_safesysmalloc", "Perl_safesyscalloc", "Perl_safesysrealloc",
	/* GLib */
	"g_malloc*", "g_realloc*", "g_new*", "g_try_malloc*", "g_try_realloc*", "g_strdup",
	/* CPython */
	"PyMem_*Malloc", "PyMem_*Calloc", "PyMem_*Realloc", "PyObject_Malloc", "PyObject_Calloc",
	"PyObject_Realloc", "_PyObject_Malloc", "_PyMem_RawMalloc", "_PyMem_RawRealloc",
	NULL,
};

static int matches(const char *name, const char *const *patterns, int n)
{
	for (int i = 0; n < 0 ? patterns[i] != NULL : i < n; i++)
		if (fnmatch(patterns[i], name, 0) == 0) return 1;
	return 0;
}

int hv_is_wrapper_name(const char *name, const char *const *extra, int nextra)
{
	return matches(name, hv_default_wrappers, -1) || (extra && matches(name, extra, nextra));
}

/* The innermost function name of a context's frame ("??" without one). */
static const char *frame_name(const hv_heap *h, uint32_t ctx)
{
	const mt_location *locs;
	int n = hv_lookup(h, hv_context_code(h, ctx), &locs);
	return n > 0 ? hv_defname(&locs[n - 1]) : "??";
}

/* A frame without a name: memtraced names it "object+0xOFFSET". */
static int unnamed(const char *name) { return strstr(name, "+0x") != NULL; }

/* Per code of an unnamed frame, what the rule needs. */
struct code_state {
	uint64_t code;
	uint64_t parent_code; /* the first caller seen */
	int callers;          /* 1, or 2 for "two or more" */
	int fails;            /* allocates itself, or calls something other than an allocator */
};

static int by_code(const void *a, const void *b)
{
	uint64_t x = ((const struct code_state *)a)->code, y = ((const struct code_state *)b)->code;
	return x < y ? -1 : x > y;
}

static struct code_state *find(struct code_state *s, size_t n, uint64_t code)
{
	struct code_state key = {.code = code};
	return bsearch(&key, s, n, sizeof *s, by_code);
}

int hv_apply_wrappers(hv_heap *h, const char *const *extra, int nextra, int keep,
		      hv_wrapper_report *rep)
{
	if (rep) memset(rep, 0, sizeof *rep);
	uint32_t n = hv_context_count(h);
	if (keep) {
		hv_set_site_skip(h, NULL);
		return 0;
	}
	uint8_t *skip = calloc(n ? n : 1, 1);
	struct code_state *st = calloc(n ? n : 1, sizeof *st);
	if (!skip || !st) {
		free(skip);
		free(st);
		return -1;
	}
	/* the unnamed frames' codes, one entry each */
	size_t ns = 0;
	for (uint32_t c = 1; c < n; c++)
		if (hv_context_depth(h, c) > 0 && unnamed(frame_name(h, c)))
			st[ns++] = (struct code_state){.code = hv_context_code(h, c)};
	qsort(st, ns, sizeof *st, by_code);
	size_t u = 0;
	for (size_t i = 0; i < ns; i++)
		if (!u || st[u - 1].code != st[i].code) st[u++] = st[i];
	ns = u;
	for (uint32_t c = 1; c < n; c++) {
		if (hv_context_depth(h, c) == 0) continue;
		struct code_state *me = ns ? find(st, ns, hv_context_code(h, c)) : NULL;
		if (me) {
			if (hv_context_counts(h, c)->alloc_events) me->fails = 1; /* allocates itself */
			uint32_t p = hv_context_parent(h, c);
			uint64_t pc = hv_context_depth(h, p) > 0 ? hv_context_code(h, p) : 0;
			if (!me->callers) me->callers = 1, me->parent_code = pc;
			else if (pc != me->parent_code) me->callers = 2;
		}
		/* the parent calls this frame directly: an allocation function or not */
		uint32_t p = hv_context_parent(h, c);
		struct code_state *caller = ns && hv_context_depth(h, p) > 0 ?
			find(st, ns, hv_context_code(h, p)) : NULL;
		if (caller && !matches(frame_name(h, c), alloc_functions, -1)) caller->fails = 1;
	}
	for (uint32_t c = 1; c < n; c++) {
		if (hv_context_depth(h, c) == 0) continue;
		const char *name = frame_name(h, c);
		if (hv_is_wrapper_name(name, extra, nextra)) {
			skip[c] = 1;
			continue;
		}
		struct code_state *me = ns && unnamed(name) ? find(st, ns, hv_context_code(h, c)) : NULL;
		if (me && !me->fails && me->callers >= 2) {
			skip[c] = 1;
			if (rep && me->callers != 3) { /* counted once per code */
				if (!rep->unnamed_folded++) snprintf(rep->example, sizeof rep->example, "%s", name);
				me->callers = 3;
			}
		}
	}
	free(st);
	hv_set_site_skip(h, skip);
	return 0;
}
