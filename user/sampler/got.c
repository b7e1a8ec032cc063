/* GOT redirection: for every loaded object (but the sampler itself, ld.so and the vdso), the
 * R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT relocations naming a wrapped function get the
 * wrapper's address, by an atomic 8-byte store; the old value is recorded for stop.
 *
 * - A slot is redirected when it holds the global definition (the real function) or a value
 *   inside its own object (a lazy-binding PLT stub, which ld.so would resolve to the global
 *   definition). A slot bound elsewhere (an object with its own allocator in a local scope, a
 *   canonical PLT address) is left alone: its calls must not reach another allocator.
 * - The page's protection is read from /proc/self/maps, not computed from PT_GNU_RELRO: an
 *   object that another thread is loading right now is not write-protected yet, and must not
 *   become so under ld.so's feet. A read-only page is made writable only around the store.
 * - Objects done are remembered (load address, dynamic section) until something is unloaded,
 *   and a walk with no load or unload since the last one (dl_iterate_phdr's adds/subs
 *   counters) returns at once: dlopen pays little.
 * - Locking: the slow patch path only, by a lock word holding the owner's pid, so a child
 *   forked while another thread held it takes it over; a fork waits for a walk under way
 *   (got_guard_forks: the walk holds ld.so's dl_load_write_lock, which a child must not
 *   inherit held). */
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include "internal.h"
#include "got.h"

#define MAX_RECORDS 16384
#define MAX_SEEN 8192

struct slot_record {
	uintptr_t slot, old;
};
struct seen_object {
	uintptr_t base, dynamic;
};

static struct slot_record *records;
static size_t nrecords;
static struct seen_object *seen;
static size_t nseen;
static unsigned long long last_adds = ~0ULL, last_subs = ~0ULL;
static volatile int lock_owner;

extern ElfW(Dyn) _DYNAMIC[] HIDDEN;

int got_init(void)
{
	if (records)
		return 0;
	void *r = mmap(NULL, MAX_RECORDS * sizeof(*records) + MAX_SEEN * sizeof(*seen),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return -1;
	seen = (struct seen_object *)((struct slot_record *)r + MAX_RECORDS);
	records = r;
	return 0;
}

bool got_lock(bool wait)
{
	int me = getpid();
	for (;;) {
		int cur = 0;
		if (__atomic_compare_exchange_n(&lock_owner, &cur, me, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return true;
		/* held under another pid: the process we were forked from, whose holder thread
		 * does not exist here */
		if (cur != me && __atomic_compare_exchange_n(&lock_owner, &cur, me, false,
							     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return true;
		if (!wait)
			return false;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

void got_unlock(void)
{
	__atomic_store_n(&lock_owner, 0, __ATOMIC_RELEASE);
}

/* A fork waits for a walk under way (issue 34). The walk runs inside dl_iterate_phdr, which
 * holds ld.so's dl_load_write_lock; glibc's fork resets dl_load_lock and dl_load_tls_lock in
 * the child but not that one, so a child forked during a walk inherited it held by a thread it
 * does not have: its next dlopen or dl_iterate_phdr (an exception's unwinding) never returned.
 * The wait is bounded: a fork from a signal handler that interrupted the walk's own thread
 * goes on after a second, as before. */
static __thread bool fork_took_lock;

static void fork_prepare(void)
{
	mts_usdt_held = 1; /* until the handlers below (usdt.c) */
	fork_took_lock = false;
	for (int i = 0; i < 10000; i++) { /* 10000 x 0.1 ms */
		if (got_lock(false)) {
			fork_took_lock = true;
			return;
		}
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
}

static void fork_done(void)
{
	if (fork_took_lock) got_unlock(); /* in the child: its pid differs, got_lock takes it over anyway */
	fork_took_lock = false;
	mts_usdt_held = 0;
}

static void fork_child(void)
{
	mts_usdt_fork_child();
	fork_done();
}

void got_guard_forks(void)
{
	static int registered;
	if (__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL) == 0)
		pthread_atfork(fork_prepare, fork_done, fork_child);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0;
}

/* The protection of the mapping holding addr (PROT_*), or -1. Streams /proc/self/maps through
 * a stack buffer: no stdio, no allocation. */
static int page_prot(uintptr_t addr)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[4096];
	int state = 0, field = 0, prot = 0, result = -1;
	uintptr_t start = 0, end = 0;
	ssize_t n;
	while (result < 0 && (n = read(fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < n && result < 0; i++) {
			char c = buf[i];
			switch (state) {
			case 0: /* start address */
				if (c == '-') state = 1;
				else start = start * 16 + hexval(c);
				break;
			case 1: /* end address */
				if (c == ' ') { state = 2; field = 0; prot = 0; }
				else end = end * 16 + hexval(c);
				break;
			case 2: /* rwx */
				if (field == 0 && c == 'r') prot |= PROT_READ;
				if (field == 1 && c == 'w') prot |= PROT_WRITE;
				if (field == 2 && c == 'x') prot |= PROT_EXEC;
				if (++field == 3) {
					if (addr >= start && addr < end)
						result = prot;
					state = 3;
				}
				break;
			default: /* the rest of the line */
				if (c == '\n') { state = 0; start = end = 0; }
			}
		}
	}
	close(fd);
	return result;
}

/* Stores value into *slot, opening a read-only page only for the store. */
static int store_slot(uintptr_t *slot, uintptr_t value)
{
	int prot = page_prot((uintptr_t)slot);
	if (prot < 0)
		return -1;
	if (prot & PROT_WRITE) {
		__atomic_store_n(slot, value, __ATOMIC_RELEASE);
		return 0;
	}
	uintptr_t pagesz = getauxval(AT_PAGESZ) ? getauxval(AT_PAGESZ) : 4096;
	void *page = (void *)((uintptr_t)slot & ~(pagesz - 1));
	if (mprotect(page, pagesz, prot | PROT_WRITE) != 0)
		return -1;
	__atomic_store_n(slot, value, __ATOMIC_RELEASE);
	mprotect(page, pagesz, prot);
	return 0;
}

static struct slot_record *find_record(uintptr_t slot)
{
	for (size_t i = 0; i < nrecords; i++)
		if (records[i].slot == slot)
			return &records[i];
	return NULL;
}

enum walk_mode { WALK_PATCH, WALK_RESTORE, WALK_CHECK };

struct walk {
	enum walk_mode mode;
	long count;
	unsigned long checked, missed, own; /* WALK_CHECK */
	bool incomplete; /* some object must be walked again */
	uintptr_t self_dynamic, ldso, vdso;
};

/* The object's address range and where its ELF header is mapped. */
struct object_span {
	uintptr_t lo, hi, ehdr, base;
	bool binds_own; /* some slot of a wrapped name holds the object's own definition */
	ElfW(Dyn) *dynamic;
};

static void object_span(const struct dl_phdr_info *info, struct object_span *s)
{
	s->lo = UINTPTR_MAX;
	s->hi = s->ehdr = 0;
	s->dynamic = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_DYNAMIC)
			s->dynamic = (ElfW(Dyn) *)start;
		if (ph->p_type != PT_LOAD)
			continue;
		if (start < s->lo)
			s->lo = start;
		if (start + ph->p_memsz > s->hi)
			s->hi = start + ph->p_memsz;
		if (ph->p_offset == 0)
			s->ehdr = start;
	}
}

/* ld.so relocates most d_ptr entries in place, not all (read-only dynamic sections): a value
 * below the load address is still a link-time address. */
static uintptr_t dyn_ptr(uintptr_t base, uintptr_t v)
{
	return v < base ? v + base : v;
}

struct reloc_tables {
	const ElfW(Sym) *symtab;
	const char *strtab;
	const ElfW(Rela) *rela[2];
	size_t count[2];
};

static bool read_dynamic(uintptr_t base, const ElfW(Dyn) *d, struct reloc_tables *t)
{
	size_t relasz = 0, pltsz = 0, relaent = sizeof(ElfW(Rela));
	uintptr_t rela = 0, jmprel = 0, symtab = 0, strtab = 0;
	long pltrel = DT_RELA;
	for (; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
		case DT_STRTAB: strtab = d->d_un.d_ptr; break;
		case DT_RELA: rela = d->d_un.d_ptr; break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_RELAENT: relaent = d->d_un.d_val; break;
		case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
		case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
		case DT_PLTREL: pltrel = (long)d->d_un.d_val; break;
		}
	}
	if (!symtab || !strtab || relaent != sizeof(ElfW(Rela)) || pltrel != DT_RELA)
		return false;
	t->symtab = (const ElfW(Sym) *)dyn_ptr(base, symtab);
	t->strtab = (const char *)dyn_ptr(base, strtab);
	t->rela[0] = jmprel ? (const ElfW(Rela) *)dyn_ptr(base, jmprel) : NULL;
	t->count[0] = jmprel ? pltsz / sizeof(ElfW(Rela)) : 0;
	t->rela[1] = rela ? (const ElfW(Rela) *)dyn_ptr(base, rela) : NULL;
	t->count[1] = rela ? relasz / sizeof(ElfW(Rela)) : 0;
	return true;
}

enum slot_kind {
	SLOT_TRACED,  /* bound to the traced function (its definition or canonical address) */
	SLOT_LAZY,    /* a lazy-binding stub of its own object: ld.so will bind it to the traced one */
	SLOT_OWN,     /* bound (or to be bound) to a definition in its own object */
	SLOT_FOREIGN, /* bound to some other object's definition */
	SLOT_WRAPPED, /* ours */
};

/* Where a slot leads. A slot's value inside its own object is either a lazy-binding stub or
 * the object's own definition of the name: a plugin loaded with RTLD_DEEPBIND that defines
 * malloc binds its calls to itself, first eagerly or lazily. Such an object's slot is its own
 * allocator's as long as it does not hold the traced definition itself. */
static enum slot_kind slot_kind(const struct object_span *s, uintptr_t cur, uintptr_t real,
				uintptr_t canon, const ElfW(Sym) *sym, bool binds_own)
{
	if (mts_wrap_by_addr(cur))
		return SLOT_WRAPPED;
	if (!real)
		return SLOT_FOREIGN; /* no such function in the process (jemalloc's API without it) */
	if (cur == real || (canon && cur == canon))
		return SLOT_TRACED;
	bool own_def = sym->st_shndx != SHN_UNDEF && sym->st_value != 0;
	if (cur >= s->lo && cur < s->hi) {
		if (own_def && cur == s->base + sym->st_value)
			return SLOT_OWN;
		/* a lazy stub: ld.so binds it to the global definition, but an object that bound
		 * other allocation functions to itself (RTLD_DEEPBIND) binds this one to itself too */
		return own_def && binds_own ? SLOT_OWN : SLOT_LAZY;
	}
	return SLOT_FOREIGN;
}

/* One slot naming a wrapped function. Returns false when the object must be walked again. */
static bool patch_slot(struct walk *w, const struct object_span *s, uintptr_t *slot,
		       const struct wrap_entry *e, const ElfW(Sym) *sym)
{
	uintptr_t wrapper = (uintptr_t)e->wrapper, real = (uintptr_t)*e->real;
	uintptr_t canon = mts_canonical[e->fn];
	uintptr_t cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	enum slot_kind kind = slot_kind(s, cur, real, canon, sym, s->binds_own);
	if (w->mode == WALK_CHECK) {
		w->checked++;
		if (kind == SLOT_TRACED || kind == SLOT_LAZY) {
			if (w->missed < SAMPLER_CHECK_KEEP)
				memtraced_sampler_check.missed_slot[w->missed] = (uintptr_t)slot;
			w->missed++;
		}
		if (kind == SLOT_OWN)
			w->own++;
		return true;
	}
	if (w->mode == WALK_RESTORE) {
		if (cur != wrapper)
			return true;
		struct slot_record *r = find_record((uintptr_t)slot);
		uintptr_t old = r ? r->old : real;
		if (!r)
			STAT_ADD(slots_lost, 1);
		if (store_slot(slot, old) != 0) {
			STAT_ADD(patch_errors, 1);
			return false;
		}
		w->count++;
		STAT_ADD(slots_restored, 1);
		return true;
	}
	if (cur == wrapper || !real)
		return true;
	if (kind == SLOT_OWN || kind == SLOT_FOREIGN) {
		/* bound to another allocator than the traced one: its blocks must never reach the
		 * traced allocator's free, nor the reverse */
		STAT_ADD(slots_foreign, 1);
		return true;
	}
	struct slot_record *r = find_record((uintptr_t)slot);
	if (!r) {
		if (nrecords == MAX_RECORDS) {
			STAT_ADD(records_full, 1);
			return false;
		}
		r = &records[nrecords];
		r->slot = (uintptr_t)slot;
		nrecords++;
	}
	r->old = cur; /* a slot of an object unloaded and loaded again: its new old value */
	if (store_slot(slot, wrapper) != 0) {
		STAT_ADD(patch_errors, 1);
		return false;
	}
	w->count++;
	STAT_ADD(slots_patched, 1);
	return true;
}

static bool is_seen(uintptr_t base, uintptr_t dynamic)
{
	for (size_t i = 0; i < nseen; i++)
		if (seen[i].base == base && seen[i].dynamic == dynamic)
			return true;
	return false;
}

static int on_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct walk *w = data;
	struct object_span s;
	object_span(info, &s);
	uintptr_t base = info->dlpi_addr;
	if (!s.dynamic || (uintptr_t)s.dynamic == w->self_dynamic)
		return 0;
	if ((w->ldso && (s.ehdr == w->ldso || base == w->ldso)) || (w->vdso && s.ehdr == w->vdso))
		return 0;
	if (w->mode == WALK_PATCH && is_seen(base, (uintptr_t)s.dynamic))
		return 0;
	struct reloc_tables t;
	if (!read_dynamic(base, s.dynamic, &t))
		return 0;
	s.base = base;
	s.binds_own = false;
	for (int k = 0; k < 2 && !s.binds_own; k++)
		for (size_t i = 0; i < t.count[k]; i++) {
			const ElfW(Rela) *r = &t.rela[k][i];
			unsigned type = ELF64_R_TYPE(r->r_info), sym = ELF64_R_SYM(r->r_info);
			if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || sym == 0 ||
			    t.symtab[sym].st_shndx == SHN_UNDEF || !t.symtab[sym].st_value)
				continue;
			const struct wrap_entry *e = mts_wrap_by_name(t.strtab + t.symtab[sym].st_name);
			if (!e)
				continue;
			uintptr_t own = base + t.symtab[sym].st_value;
			uintptr_t cur = __atomic_load_n((uintptr_t *)(base + r->r_offset), __ATOMIC_ACQUIRE);
			if (cur == own && own != (uintptr_t)*e->real) {
				s.binds_own = true;
				break;
			}
		}
	bool complete = true;
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < t.count[k]; i++) {
			const ElfW(Rela) *r = &t.rela[k][i];
			unsigned type = ELF64_R_TYPE(r->r_info), sym = ELF64_R_SYM(r->r_info);
			if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || sym == 0)
				continue;
			const struct wrap_entry *e = mts_wrap_by_name(t.strtab + t.symtab[sym].st_name);
			if (e && !patch_slot(w, &s, (uintptr_t *)(base + r->r_offset), e, &t.symtab[sym]))
				complete = false;
		}
	}
	if (!complete)
		w->incomplete = true;
	else if (w->mode == WALK_PATCH && nseen < MAX_SEEN)
		seen[nseen++] = (struct seen_object){ base, (uintptr_t)s.dynamic };
	return 0;
}

/* The loader's load and unload counters, from the first object. */
static int read_counters(struct dl_phdr_info *info, size_t size, void *data)
{
	unsigned long long *c = data;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		c[0] = info->dlpi_adds;
		c[1] = info->dlpi_subs;
	}
	return 1;
}

/* The objects of the link-map namespaces after the first (dlmopen), which dl_iterate_phdr does
 * not show: glibc 2.35+ chains each namespace's r_debug to the next (r_version 2). Read in a
 * dl_iterate_phdr callback: ld.so links and unlinks link maps holding the lock it holds then,
 * so none is freed under us. The first call counts; it stops the iteration. */
static int count_other_namespaces(struct dl_phdr_info *info, size_t size, void *data)
{
	unsigned long *n = data;
	const struct r_debug *base = &_r_debug;
	__asm__("" : "+r"(base)); /* glibc's _r_debug is the first r_debug_extended */
	if (base->r_version < 2) return 1;
	const struct r_debug_extended *d = ((const struct r_debug_extended *)base)->r_next;
	for (int ns = 0; d && ns < 16; d = d->r_next, ns++) /* glibc has 16 namespaces at most */
		for (const struct link_map *m = d->base.r_map; m; m = m->l_next)
			if (m->l_name && m->l_name[0]) (*n)++;
	return 1;
}

static long walk_locked(enum walk_mode mode)
{
	struct walk w = {
		.mode = mode,
		.self_dynamic = (uintptr_t)_DYNAMIC,
		.ldso = getauxval(AT_BASE),
		.vdso = getauxval(AT_SYSINFO_EHDR),
	};
	if (mode == WALK_PATCH) {
		unsigned long long c[2] = { ~0ULL, ~0ULL };
		dl_iterate_phdr(read_counters, c);
		if (c[0] != ~0ULL && c[0] == last_adds && c[1] == last_subs)
			return 0; /* nothing loaded or unloaded since the last walk */
		if (c[1] != last_subs)
			nseen = 0; /* something went: addresses may be reused */
		last_adds = c[0];
		last_subs = c[1];
	}
	STAT_ADD(walks, 1);
	dl_iterate_phdr(on_object, &w);
	if (w.incomplete)
		last_adds = ~0ULL; /* the next walk tries again */
	if (mode == WALK_PATCH) {
		/* the check: every slot that leads to a traced function now points to us */
		struct walk c = { .mode = WALK_CHECK, .self_dynamic = w.self_dynamic, .ldso = w.ldso,
				  .vdso = w.vdso };
		dl_iterate_phdr(on_object, &c);
		memtraced_sampler_check.checked = c.checked;
		memtraced_sampler_check.missed = c.missed;
		memtraced_sampler_check.own = c.own;
		unsigned long other_ns = 0;
		dl_iterate_phdr(count_other_namespaces, &other_ns);
		memtraced_sampler_check.other_ns = other_ns;
		__atomic_store_n(&memtraced_sampler_check.walks, memtraced_sampler_check.walks + 1,
				 __ATOMIC_RELEASE);
	}
	return w.count;
}

/* ---- the definition behind a canonical PLT address (see mts_canonical) ---- */

#define MAX_OBJECTS 512

struct object_list {
	int n;
	const char *name[MAX_OBJECTS];
	struct object_span span[MAX_OBJECTS];
	uintptr_t base[MAX_OBJECTS];
	uintptr_t self_dynamic, vdso;
};

static int list_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct object_list *l = data;
	if (l->n == MAX_OBJECTS)
		return 1;
	object_span(info, &l->span[l->n]);
	if ((uintptr_t)l->span[l->n].dynamic == l->self_dynamic ||
	    (l->vdso && l->span[l->n].ehdr == l->vdso))
		return 0;
	l->name[l->n] = info->dlpi_name;
	l->base[l->n] = info->dlpi_addr;
	l->n++;
	return 0;
}

/* Does the program (l's first object) take name's address: an undefined symbol of that name
 * with a value (its PLT entry) in its dynamic symbols, named by one of its relocations? */
static bool program_canonical(const struct object_list *l, const char *name, uintptr_t addr)
{
	struct reloc_tables t;
	if (!l->span[0].dynamic || !read_dynamic(l->base[0], l->span[0].dynamic, &t))
		return false;
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < t.count[k]; i++) {
			unsigned sym = ELF64_R_SYM(t.rela[k][i].r_info);
			const ElfW(Sym) *y = &t.symtab[sym];
			if (sym && y->st_shndx == SHN_UNDEF && y->st_value &&
			    l->base[0] + y->st_value == addr && strcmp(t.strtab + y->st_name, name) == 0)
				return true;
		}
	return false;
}

void got_resolve_canonical(void)
{
	static struct object_list l; /* large: not on the caller's stack */
	memset(&l, 0, sizeof l);
	l.self_dynamic = (uintptr_t)_DYNAMIC;
	l.vdso = getauxval(AT_SYSINFO_EHDR);
	dl_iterate_phdr(list_object, &l);
	if (l.n < 2)
		return;
	for (int i = 0; i < MTS_FN_COUNT; i++) {
		uintptr_t p = (uintptr_t)*mts_wraps[i].real;
		if (!p || p < l.span[0].lo || p >= l.span[0].hi ||
		    !program_canonical(&l, mts_wraps[i].name, p))
			continue;
		/* the first object after the program that defines it: what the program's own PLT
		 * slot is bound to (ld.so skips the program's undefined symbol for it) */
		for (int j = 1; j < l.n; j++) {
			if (!l.name[j] || !l.name[j][0])
				continue;
			void *h = dlopen(l.name[j], RTLD_NOLOAD | RTLD_LAZY);
			if (!h)
				continue;
			uintptr_t q = (uintptr_t)dlsym(h, mts_wraps[i].name);
			dlclose(h);
			if (q && q >= l.span[j].lo && q < l.span[j].hi) {
				mts_canonical[i] = p;
				*mts_wraps[i].real = (void *)q;
				break;
			}
		}
	}
}

long mts_patch_all(bool wait)
{
	if (!got_lock(wait))
		return -EBUSY;
	mts_config.pending_walk = 0;
	long n = mts_config.active ? walk_locked(WALK_PATCH) : 0;
	got_unlock();
	return n;
}

long got_patch_locked(void)
{
	return walk_locked(WALK_PATCH);
}

long got_restore_locked(void)
{
	long n = walk_locked(WALK_RESTORE);
	nrecords = 0;
	nseen = 0;
	last_adds = last_subs = ~0ULL;
	return n;
}
