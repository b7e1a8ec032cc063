// SPDX-License-Identifier: GPL-2.0
/* memtraced's BPF side: uprobes on the target's allocator.
 *
 * One loaded object serves every traced process of the daemon (userspace's tracer_host.c):
 * each holds a slot (`slots`, include/memtraced_events.h), its uprobe links carry its owner
 * in their cookies, records and live-map keys carry the owner, counters are per slot.
 *
 * Cost model (docs/kernel-facts.md): the trap is the cost, so an UNSAMPLED call does as little
 * as possible: the slot check (owner, tgid, muted), a per-CPU counter of the slot, a nesting
 * check (two lookups), the byte countdown, and the entry program returns 1 so the session
 * uprobe sets no return probe. No map update, no ring-buffer record. (realloc & co. also note
 * themselves in task storage.)
 *
 * A SAMPLED call (or a realloc of a sampled live block) stores its entry state in the
 * `inflight` map (key: tid) and keeps its return probe. At the return, a successful allocation
 * gets a seq, goes into the `live` map ((address, owner) -> seq), and one MT_REC_ALLOC record is written
 * with the entry registers and a copy of the user stack from the entry's rsp (the caller frames
 * do not change while the callee runs). Frees of live sampled blocks write MT_REC_FREE.
 *
 * Sampling: a Poisson process over bytes. Each CPU keeps a countdown of bytes until the next
 * sample point; gaps are exponential with mean 8/rate bytes, read from a table userspace fills,
 * indexed by bpf_get_prandom_u32(). nsamples = number of sample points inside the block. With
 * rate 1 every word is a sample point: nsamples = ceil(size / 8).
 *
 * Programs (the loader picks per mode, see user/daemon/core/tracer/tracer.c):
 *   session mode (attach type 57):      alloc_session on allocation functions, free_probe (48)
 *   fallback (uprobe + uretprobe):      alloc_entry + alloc_return, free_probe
 *   floor (benchmark): floor_session or floor_entry + floor_return, floor_free: empty bodies
 *   usdt (an in-process sampler, --inject): usdt_alloc, usdt_free on otel_memory:alloc/free
 *   mappings (any mode but the floor): the mmap, munmap, mremap, mprotect and madvise
 *   system call tracepoints (global, their slot found by tgid), see mapping_probes.bpf.h
 * The probed function and the tracer's owner are the attach cookie (MT_COOKIE).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "memtraced_events.h"
/* Each USDT tracer's two links hold a spec id each, and a host has MT_MAX_SLOTS tracers: with
 * libbpf's 256 the 129th sampler's attach would fail, and libbpf 1.1 then frees its list of free
 * ids while still holding it (realloc to 0 bytes; fixed upstream in f1170803). */
#define BPF_USDT_MAX_SPEC_CNT (2 * MT_MAX_SLOTS)
#include <bpf/usdt.bpf.h>
#include "python_frames.h"

/* v, at most max, in a form every verifier sees: the compare is made in the register that is
 * then used (an asm clang cannot split or move), so no spilled copy from before it is reused.
 * 6.1's verifier loses a C clamp when clang reloads the value from an earlier spill. */
static __always_inline __u64 bounded(__u64 v, const __u64 max)
{
	asm volatile("if %0 <= %1 goto +1; %0 = %1" : "+r"(v) : "i"(max));
	return v;
}

char LICENSE[] SEC("license") = "GPL";

extern bool bpf_session_is_return(void) __ksym __weak;

/* The traced processes, one slot each (include/memtraced_events.h: owners, cookies). Set by
 * userspace through the mmap'ed .bss: a slot is given its process when a tracer takes it or
 * adopts one (tracer_adopt), muted when the process exec'd (the calls are the new program's,
 * which a tracer of its own records: these probes stop at once). */
struct mt_slot slots[MT_MAX_SLOTS];
/* Set by userspace before load. */
const volatile __u32 sample_all = 0;         /* rate 1: every word is a sample point */
const volatile __u64 mean_gap = 8;           /* mean bytes between sample points: 8 / rate */
const volatile __u32 stack_bytes = MT_STACK_BYTES_DEFAULT;
const volatile __u32 stacks_in_pieces = 0;  /* tests: every stack copied in pieces */
const volatile __u64 wakeup_bytes = 1 << 21; /* wake the consumer when this much is pending */
const volatile __u64 exp_gaps[MT_EXP_TABLE]; /* exponential variates, mean mean_gap, >= 1 */
struct mt_cpu_state cpu_state[MT_MAX_CPUS];
__u64 last_seq;

/* Each slot's counters, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MT_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct mt_counts);
} slot_counts SEC(".maps");

/* The owner of a traced process's slot, for the programs whose attachment says nothing of it
 * (the system call tracepoints are global; libbpf's USDT programs use the cookie). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4 * MT_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} tgid_owner SEC(".maps");

/* The slot of owner if it is live and traces the calling process, with its counters. */
static __always_inline struct mt_slot *slot_of(__u32 owner, __u32 tgid, struct mt_counts **c)
{
	__u32 i = MT_OWNER_SLOT(owner);
	struct mt_slot *sl = &slots[i];
	if (sl->owner != owner || sl->tgid != tgid || sl->muted)
		return NULL;
	*c = bpf_map_lookup_elem(&slot_counts, &i);
	return *c ? sl : NULL;
}

/* The same, found by the calling process's tgid. */
static __always_inline struct mt_slot *slot_of_tgid(__u32 tgid, __u32 *owner, struct mt_counts **c)
{
	__u32 *o = bpf_map_lookup_elem(&tgid_owner, &tgid);
	if (!o)
		return NULL;
	*owner = *o;
	return slot_of(*owner, tgid, c);
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* Sampled live blocks: the truth about which are live (userspace reconciles against it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct mt_live_key);
	__type(value, struct mt_live_block);
} live SEC(".maps");

/* What the return of a call we keep a return probe for needs, per thread. */
struct inflight_call {
	__u64 regs[MT_NREGS];  /* at entry, DWARF order */
	__u64 entry_sp;
	__u64 size;
	__u64 nsamples;        /* 0: only the realloc'd old block matters */
	__u64 memptr;          /* posix_memalign's result pointer; xallocx's block */
	__u64 old_ptr;         /* realloc/reallocarray: the sampled live block being resized */
	__u64 old_seq;
	__u32 fn;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct inflight_call);
} inflight SEC(".maps");

/* Per thread (task local storage: created once per thread, then written in place, no map
 * update): the last UNSAMPLED call of a function that may call another probed one. */
struct unsampled_outer {
	__u64 sp;   /* its rsp at entry (where its return address is) */
	__u64 ret;  /* its return address */
	__u64 ip;   /* its entry address */
	__u32 fn;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct unsampled_outer);
} unsampled_outer SEC(".maps");

/* The call state of the USDT and mapping programs (too big for the BPF stack): per CPU, a
 * program run is never nested in another on the same CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct inflight_call);
} call_scratch SEC(".maps");

#define MAX_DRAWS 32

static __always_inline struct mt_cpu_state *this_cpu_state(void)
{
	__u32 cpu = bpf_get_smp_processor_id() & (MT_MAX_CPUS - 1);
	return &cpu_state[cpu];
}

static __always_inline __u64 draw_gap(void)
{
	__u32 i = bpf_get_prandom_u32() & (MT_EXP_TABLE - 1);
	return exp_gaps[i];
}

/* Number of sample points in a block of size bytes; advances this CPU's countdown. */
static __always_inline __u64 sample_points(struct mt_cpu_state *st, __u64 size)
{
	if (sample_all)
		return (size + 7) / 8;
	__u64 left = st->countdown;
	if (left == 0)
		left = draw_gap();
	if (size < left) { /* the common, unsampled case */
		st->countdown = left - size;
		return 0;
	}
	__u64 n = 1;
	size -= left;
	for (int i = 0; i < MAX_DRAWS; i++) {
		__u64 gap = draw_gap();
		if (size < gap) {
			st->countdown = gap - size;
			return n;
		}
		size -= gap;
		n++;
	}
	/* A block longer than MAX_DRAWS gaps: count the rest by its expectation (the process
	 * is memoryless, so a fresh gap after it is still exact). */
	__u64 gap = mean_gap ? mean_gap : 1;
	n += size / gap;
	size %= gap;
	gap = draw_gap();
	if (size < gap) {
		st->countdown = gap - size;
	} else {
		n++;
		st->countdown = draw_gap();
	}
	return n;
}

/* n * elem would overflow 64 bits. The barrier keeps clang from turning the division test
 * into a 128-bit multiply (__multi3), which BPF does not have. */
static __always_inline bool mul_overflows(__u64 n, __u64 elem)
{
	if (!elem)
		return false;
	__u64 limit = ~0ULL / elem;
	asm volatile("" : "+r"(limit));
	return n > limit;
}

static __always_inline bool fn_may_nest(__u32 fn)
{
	return fn != MT_FN_MALLOC && fn != MT_FN_FREE;
}

/* Is this call nested inside another probed call of the same thread (realloc(NULL, n)
 * tail-jumping to malloc, realloc calling malloc, reallocarray tail-jumping to realloc, an
 * interposer calling the real malloc...)? Such a call is the same user allocation: it is
 * skipped, so each allocation is counted once, by the outermost probed function.
 *
 * 1. Outer call with a return probe (sampled, or realloc of a live block): its entry is in
 *    `inflight` until its return; a call at the same or a deeper rsp is nested (same rsp: a
 *    tail jump). Session returns are reliable; the depth bound below covers a thread that
 *    died inside the call.
 * 2. Outer call UNSAMPLED: it has no return probe (that is the point), so we cannot know when
 *    it ends. Its entry is left in the thread's task storage (`unsampled_outer`), and in a
 *    per-CPU slot as a backup (task storage gets refuse to run while another program on the
 *    CPU is inside task storage code). A call is nested when the outer's return address is
 *    still in its slot on the stack and either a) same rsp, another function (a tail jump), or
 *    b) deeper, and called from within 64 KiB of the outer function's entry (from its body).
 *    A same-rsp call of the same function is a new call from the same call site; a call from
 *    the same frame after the outer returned has overwritten the return-address slot.
 * Frees are not subject to this: the live map delete decides who reports a block's free.
 */
/* A nested call runs in the outer call's frames: a few hundred bytes below its entry rsp. The
 * bound keeps an entry left by a thread that died inside a sampled call (its return never
 * came) from swallowing the calls of a later thread with the same tid on another stack. */
#define NEST_MAX_DEPTH (64 << 10)

/* Is the call at sp (of function fn) nested in the unsampled outer call `o`? */
static __always_inline bool nested_in_unsampled(__u64 o_sp, __u64 o_ret, __u64 o_ip, __u32 o_fn,
						__u32 fn, __u64 sp)
{
	if (!o_sp || sp > o_sp || o_sp - sp >= NEST_MAX_DEPTH)
		return false;
	__u64 outer_ret = 0, our_ret = 0;
	if (bpf_probe_read_user(&outer_ret, sizeof(outer_ret), (void *)o_sp))
		return false;
	/* The return address may have been replaced by the uretprobe trampoline: the kernel sets
	 * a return probe on our unsampled call when ANOTHER session link (another tracer of
	 * another process) is attached at the same place, because a link's pid filter answers
	 * "want the return" for foreign tasks. The trampoline is the first slot of the mm's
	 * uprobes XOL area. */
	if (outer_ret != o_ret &&
	    outer_ret != BPF_CORE_READ(bpf_get_current_task_btf(), mm, uprobes_state.xol_area, vaddr))
		return false;
	if (sp == o_sp)
		return fn != o_fn;
	if (bpf_probe_read_user(&our_ret, sizeof(our_ret), (void *)sp))
		return false;
	return our_ret - o_ip < (64 << 10) || o_ip - our_ret < (64 << 10);
}

static __always_inline bool is_nested(struct mt_cpu_state *st, __u32 tid, __u32 fn, __u64 sp)
{
	struct inflight_call *outer = bpf_map_lookup_elem(&inflight, &tid);
	if (outer && sp <= outer->entry_sp && outer->entry_sp - sp < NEST_MAX_DEPTH)
		return true;
	struct unsampled_outer *u = bpf_task_storage_get(&unsampled_outer, bpf_get_current_task_btf(), 0, 0);
	if (u && nested_in_unsampled(u->sp, u->ret, u->ip, u->fn, fn, sp))
		return true;
	return st->nest_tid == tid &&
	       nested_in_unsampled(st->nest_sp, st->nest_ret, st->nest_ip, st->nest_fn, fn, sp);
}

static __always_inline void copy_entry_regs(__u64 *r, struct pt_regs *ctx)
{
	r[0] = ctx->ax;  r[1] = ctx->dx;  r[2] = ctx->cx;  r[3] = ctx->bx;
	r[4] = ctx->si;  r[5] = ctx->di;  r[6] = ctx->bp;  r[7] = ctx->sp;
	r[8] = ctx->r8;  r[9] = ctx->r9;  r[10] = ctx->r10; r[11] = ctx->r11;
	r[12] = ctx->r12; r[13] = ctx->r13; r[14] = ctx->r14; r[15] = ctx->r15;
	r[16] = ctx->ip;
}

/* Backpressure at the source (issue 37): while userspace falls behind it sets the slot's thin
 * to k, and of the sampled calls one in k is kept (in blocks of k per CPU, the kept one drawn
 * at random) with its sample count multiplied by k: unbiased, and k-fold fewer stack copies
 * and records. Returns the factor, 0 for a call left out. */
static __always_inline __u64 thin_keeps(struct mt_cpu_state *st, __u32 k)
{
	if (k <= 1)
		return 1;
	if (k > 1024)
		k = 1024;
	if (!st->thin_left || st->thin_k <= 1 || st->thin_left > st->thin_k) {
		st->thin_k = k;
		st->thin_left = k;
		st->thin_pick = bpf_get_prandom_u32() % k;
	}
	__u32 at = st->thin_k - st->thin_left;
	st->thin_left--;
	return at == st->thin_pick ? st->thin_k : 0;
}

/* Entry of an allocation function. Returns 1 when no return probe is wanted. */
static __always_inline int on_alloc_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct mt_counts *c;
	struct mt_slot *sl = slot_of(MT_COOKIE_OWNER(cookie), id >> 32, &c);
	if (!sl)
		return 1;
	__u32 tid = (__u32)id;
	__u32 fn = MT_COOKIE_FN(cookie);
	struct mt_live_key old_key = {.owner = MT_COOKIE_OWNER(cookie)};
	struct mt_cpu_state *st = this_cpu_state();
	__u64 sp = PT_REGS_SP(ctx);
	__u64 ip = PT_REGS_IP(ctx);
	asm volatile("" : "+r"(ip)); /* read ctx here: clang's ctx+off pointers upset the verifier */
	/* Counted once, by the outermost probed call (as heaptrack counts): realloc(NULL, n)
	 * reaching malloc, posix_memalign reaching malloc, reallocarray reaching realloc are one
	 * call each. */
	if (is_nested(st, tid, fn, sp)) {
		__sync_fetch_and_add(&c->nested_skipped, 1);
		return 1;
	}
	/* A realloc of a block also frees one: counted as a free too, like a free call. With
	 * size 0 it is only a free, and glibc makes it by calling free, whose probe counts it:
	 * nothing is counted here then. */
	bool resize = (fn == MT_FN_REALLOC || fn == MT_FN_REALLOCARRAY || fn == MT_FN_RALLOCX ||
		       fn == MT_FN_REALLOCF) && PT_REGS_PARM1(ctx);
	bool to_zero = resize && (fn == MT_FN_REALLOC || fn == MT_FN_REALLOCF) && !PT_REGS_PARM2(ctx);
	if (resize && !to_zero)
		__sync_fetch_and_add(&c->free_calls, 1);
	if (!to_zero)
		__sync_fetch_and_add(&c->alloc_calls, 1);

	__u64 size = 0, n = 0, elem = 0, old_ptr = 0, memptr = 0;
	switch (fn) {
	case MT_FN_MALLOC:
	case MT_FN_VALLOC:
	case MT_FN_PVALLOC:
	case MT_FN_NEW ... MT_FN_NEW_ARRAY_ALIGNED_NOTHROW: /* size first, alignment second */
	case MT_FN_MALLOCX:                                /* (size, flags) */
		size = PT_REGS_PARM1(ctx);
		break;
	case MT_FN_CALLOC:
		n = PT_REGS_PARM1(ctx);
		elem = PT_REGS_PARM2(ctx);
		if (mul_overflows(n, elem))
			return 1; /* overflow: calloc fails, nothing to sample */
		size = n * elem;
		break;
	case MT_FN_REALLOC:
	case MT_FN_REALLOCF:
	case MT_FN_RALLOCX: /* (ptr, size, flags) */
		old_ptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_FN_XALLOCX: /* (ptr, size, extra, flags): resizes in place or not at all */
		old_ptr = PT_REGS_PARM1(ctx);
		memptr = old_ptr; /* the result is a size: the return needs the pointer */
		size = PT_REGS_PARM2(ctx);
		break;
	case MT_FN_REALLOCARRAY:
		n = PT_REGS_PARM2(ctx);
		elem = PT_REGS_PARM3(ctx);
		if (mul_overflows(n, elem))
			return 1; /* overflow: fails with ENOMEM, the old block stays */
		old_ptr = PT_REGS_PARM1(ctx);
		size = n * elem;
		break;
	case MT_FN_POSIX_MEMALIGN:
		memptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM3(ctx);
		break;
	case MT_FN_ALIGNED_ALLOC:
	case MT_FN_MEMALIGN:
		size = PT_REGS_PARM2(ctx);
		break;
	default:
		return 1;
	}

	__u64 nsamples = size ? sample_points(st, size) : 0;
	if (nsamples)
		nsamples *= thin_keeps(st, sl->thin);
	old_key.addr = old_ptr;
	struct mt_live_block *old = old_ptr ? bpf_map_lookup_elem(&live, &old_key) : NULL;
	if (!nsamples && !old) {
		if (fn_may_nest(fn)) {
			struct unsampled_outer *u = bpf_task_storage_get(
				&unsampled_outer, bpf_get_current_task_btf(), 0,
				BPF_LOCAL_STORAGE_GET_F_CREATE);
			__u64 ret = 0;
			if (bpf_probe_read_user(&ret, sizeof(ret), (void *)sp) == 0) {
				if (u) {
					u->fn = fn;
					u->sp = sp;
					u->ret = ret;
					u->ip = ip;
				}
				st->nest_tid = tid;
				st->nest_fn = fn;
				st->nest_sp = sp;
				st->nest_ret = ret;
				st->nest_ip = ip;
			}
		}
		return 1;
	}

	struct inflight_call call = {
		.entry_sp = sp, .size = size, .nsamples = nsamples, .memptr = memptr, .fn = fn,
	};
	if (old) {
		call.old_ptr = old_ptr;
		call.old_seq = old->seq;
	}
	copy_entry_regs(call.regs, ctx);
	if (bpf_map_update_elem(&inflight, &tid, &call, BPF_ANY)) {
		__sync_fetch_and_add(&c->drop_map_full, 1);
		return 1;
	}
	return 0;
}

static __always_inline void submit(void *rec)
{
	__u64 pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(rec, pending >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline void emit_free(struct mt_counts *c, __u32 owner, __u64 id, __u64 seq,
				      __u64 addr)
{
	struct mt_free_record *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) { /* the live map no longer has it: tracer_reconcile() reports it */
		__sync_fetch_and_add(&c->drop_ringbuf, 1);
		return;
	}
	r->type = MT_REC_FREE;
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->owner = owner;
	r->seq = seq;
	r->addr = addr;
	r->time_ns = bpf_ktime_get_ns();
	submit(r);
}

struct vma_room_ctx {
	__u64 sp;
	__u64 room;
};

static long vma_room(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_room_ctx *c = data;
	c->room = vma->vm_end - c->sp;
	return 0;
}

/* How much stack there is to copy from sp: stack_bytes, clamped to the end of the stack's
 * VMA (non-sleepable bpf_probe_read_user cannot fault pages in and is all-or-nothing, and
 * beyond the VMA there is nothing to read). */
static __always_inline __u64 stack_room(__u64 sp, __u64 *room)
{
	__u64 len = stack_bytes;
	struct vma_room_ctx vc = { .sp = sp, .room = ~0ULL };
	if (bpf_find_vma(bpf_get_current_task_btf(), sp, vma_room, &vc, 0) == 0 && vc.room < len)
		len = vc.room;
	*room = vc.room;
	return len;
}



/* Copies len (<= cap) bytes of user stack from sp into buf; when a page in that range is not
 * resident (the kernel leaves a random gap of up to 8 KiB untouched near the top of the main
 * stack, under the environment), copies the longest resident prefix instead: those are the
 * frames nearest rsp, which is what unwinding needs. Non-sleepable bpf_probe_read_user is
 * all-or-nothing (and zeroes the buffer on failure), so the prefix is found by a binary search
 * over the page where the copy ends. Returns the bytes copied. */
static __always_inline __u64 prefix_end(__u64 sp, __u64 len, __u64 pages)
{
	__u64 end = ((sp & ~4095ULL) + pages * 4096) - sp;
	return end < len ? end : len;
}

/* One step of the binary search (a bpf_loop callback: its body is verified once, where an
 * unrolled search multiplied the verifier's paths). */
struct prefix_search {
	__u8 *buf;
	__u64 sp, len, good, bad;
	bool last_ok;
};

static long prefix_step(__u64 i, void *data)
{
	struct prefix_search *ps = data;
	if (ps->bad - ps->good <= 1)
		return 1;
	__u64 mid = (ps->good + ps->bad) / 2;
	__u64 n = prefix_end(ps->sp, ps->len, mid);
	if (n > MT_STACK_BYTES_MAX)
		n = MT_STACK_BYTES_MAX;
	ps->last_ok = bpf_probe_read_user(ps->buf, n, (void *)ps->sp) == 0;
	if (ps->last_ok)
		ps->good = mid;
	else
		ps->bad = mid;
	return 0;
}

/* Copies in pieces, where the kernel's long copy is not to be trusted. On Debian's 6.1 in a
 * qemu VM without KVM, now and then every long bpf_probe_read_user of a process's stack
 * (64 bytes and more: the kernel copies those with `rep movsb`, shorter ones with moves)
 * returned success and left zeros, for every record of that process's run, while an 8-byte
 * read of the same address read the word that was there: every stack of the trace had one
 * frame (the matrix's 6.1 checks failed about one run in three; never seen on 6.12 nor on
 * this machine; which of 6.1 and qemu's emulation is at fault is not known). A record whose
 * copy holds a zero at sp where a short read sees a word (long_copy_zero) is copied PIECE
 * bytes at a time: slower, and only there. */
#define PIECE 32
struct piece_copy {
	__u8 *buf;
	__u64 sp, n;
};

static long piece_step(__u64 i, void *data)
{
	struct piece_copy *pc = data;
	__u64 off = i * PIECE;
	if (off >= pc->n || off > MT_STACK_BYTES_MAX - PIECE)
		return 1;
	__u64 left = pc->n - off;
	if (left > PIECE)
		left = PIECE;
	if (bpf_probe_read_user(pc->buf + off, left, (void *)(pc->sp + off))) {
		pc->n = off; /* the readable prefix ends in this piece's page */
		return 1;
	}
	return 0;
}

/* The bytes copied: a prefix of len, as the long copy's prefix search gives. */
static __always_inline __u32 copy_in_pieces(__u8 *buf, __u64 sp, __u64 len)
{
	struct piece_copy pc = {.buf = buf, .sp = sp, .n = len};
	bpf_loop(MT_STACK_BYTES_MAX / PIECE, piece_step, &pc, 0);
	return pc.n & ~7ULL;
}

/* Did a long copy into buf read a zero at sp where a short read sees a word? The word at sp
 * is a return address or a saved value: a zero there is the fault above (or, rarely, a zero
 * that the short read sees too). Costs a load where the copy's word is not zero. */
static __always_inline bool long_copy_zero(const __u8 *buf, __u64 sp)
{
	__u64 word = 0, copied = 0;
	__builtin_memcpy(&copied, buf, 8);
	return copied == 0 && bpf_probe_read_user(&word, 8, (void *)sp) == 0 && word != 0;
}

/* The same, tried on a long copy of the 64 bytes at sp into buf (scratch): before a deep
 * stack's pieces, which are copied before the record's own bytes. */
static __always_inline bool long_copy_wrong(__u8 *buf, __u64 sp)
{
	return bpf_probe_read_user(buf, 64, (void *)sp) == 0 && long_copy_zero(buf, sp);
}

static __noinline __u32 copy_stack(__u8 *buf, __u64 sp, __u64 len)
{
	if (!buf)
		return 0;
	if (len > MT_STACK_BYTES_MAX)
		len = MT_STACK_BYTES_MAX;
	if (this_cpu_state()->in_pieces)
		return copy_in_pieces(buf, sp, len);
	if (bpf_probe_read_user(buf, len, (void *)sp) == 0)
		return len;
	/* pages spanned by [sp, sp + len): good = 0 is known to work, bad = all of them fails */
	struct prefix_search ps = {.buf = buf, .sp = sp, .len = len, .good = 0,
				   .bad = ((sp + len + 4095) >> 12) - (sp >> 12)};
	bpf_loop(6, prefix_step, &ps, 0);
	__u64 n = prefix_end(sp, len, ps.good);
	if (n > MT_STACK_BYTES_MAX)
		n = MT_STACK_BYTES_MAX;
	if (!ps.good)
		return 0;
	if (!ps.last_ok && bpf_probe_read_user(buf, n, (void *)sp))
		return 0;
	return n;
}

/* The record is built per CPU (header, then the stack copy right after it) and handed to
 * the ring buffer with bpf_ringbuf_output, sized to the stack copied: one copy of the code,
 * where reserving records of constant sizes took one copy per size class (the verifier spent
 * ~30 ms per program on those). The extra kernel memcpy of the record is paid by sampled
 * calls only. Programs of one kind never nest on a CPU, but a uprobe program and a tracepoint
 * program could share one if the kernel preempts BPF programs (preempt=full): a busy flag per
 * CPU keeps the buffer ours meanwhile (the other sample is counted as a ring-buffer drop). */
/* Where each thread's stack ends, as its last unwound sample showed (userspace writes it): a
 * copy stops there (plus a little), where the stack's mapping may go on (a main thread's
 * environment, with the kernel's untouched gap under it that made every copy fault and search
 * for its readable prefix; a thread's TLS). Cut short once, userspace removes it. (An
 * unreadable page learned per thread did that before, but a page untouched then is a frame of
 * a later call: such copies stopped in the middle of stacks.) */
#define STACK_END_SLACK 2048
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} stack_ends SEC(".maps");

#include "python_frames.bpf.h"

struct record_scratch {
	/* the record, its stack, its Python frames */
	__u8 b[sizeof(struct mt_alloc_record) + MT_STACK_BYTES_MAX +
	       MT_PY_MAX_FRAMES * sizeof(struct mt_py_frame) +
	       MT_PY_MAX_NEW * sizeof(struct mt_py_code)];
	struct py_state py; /* the walk's frames and new code objects, copied after the stack */
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY); /* per-CPU values are limited to 32 KiB: one per CPU */
	__uint(max_entries, 1);           /* set to the number of possible CPUs at load */
	__type(key, __u32);
	__type(value, struct record_scratch);
} scratch SEC(".maps");

/* A deep stack's bytes past the first MT_STACK_BYTES_MAX go first, in MT_REC_STACK_MORE
 * records of up to MT_STACK_BYTES_MAX each (one record of a constant-size scratch cannot hold
 * them): one bpf_loop step per piece, through the same scratch, which the alloc record reuses
 * after them. A piece copied short, or refused by a full ring, is the last. */
static long more_step(__u64 i, void *data)
{
	/* its state is the CPU's (a bpf_loop context on the stack took the probe's stack over
	 * the verifier's 512 bytes) */
	struct mt_cpu_state *m = this_cpu_state();
	__u64 off = (i + 1) * MT_STACK_BYTES_MAX;
	if (off >= m->more_len || m->more_sent != off - MT_STACK_BYTES_MAX)
		return 1;
	__u64 n = m->more_len - off;
	if (n > MT_STACK_BYTES_MAX)
		n = MT_STACK_BYTES_MAX;
	__u32 cpu = bpf_get_smp_processor_id();
	struct record_scratch *sc = bpf_map_lookup_elem(&scratch, &cpu);
	if (!sc)
		return 1;
	struct mt_stack_more_record *r = (struct mt_stack_more_record *)sc->b;
	__u32 got = copy_stack(r->data, m->more_sp + off, n);
	if (!got)
		return 1;
	__u64 id = bpf_get_current_pid_tgid();
	r->type = MT_REC_STACK_MORE;
	r->owner = m->more_owner;
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->seq = m->more_seq;
	r->offset = (__u32)off;
	r->len = got;
	if (bpf_ringbuf_output(&events, r, sizeof(*r) + bounded(got, MT_STACK_BYTES_MAX),
			       BPF_RB_NO_WAKEUP))
		return 1;
	m->more_sent += got;
	return got < n;
}

/* Where an allocation record comes from (a constant at each call site). */
enum alloc_kind {
	KIND_PROBE,    /* an allocator's uprobe, written at its return: regs as at its entry */
	KIND_SAMPLER,  /* an in-process sampler's USDT probe: regs and stack at the probe site */
	KIND_MAPPING,  /* an anonymous mmap/mremap system call: the user regs at the syscall */
};

static __always_inline void emit_with_scratch(struct pt_regs *ctx, struct mt_counts *c,
					      __u32 owner, __u64 id, struct inflight_call *call,
					      __u64 addr, const enum alloc_kind kind,
					      struct record_scratch *sc);

static __always_inline void emit_alloc(struct pt_regs *ctx, struct mt_counts *c, __u32 owner,
				       __u64 id, struct inflight_call *call, __u64 addr,
				       const enum alloc_kind kind)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct record_scratch *sc = bpf_map_lookup_elem(&scratch, &cpu);
	if (!sc)
		return;
	struct mt_cpu_state *st = this_cpu_state();
	if (__sync_lock_test_and_set(&st->scratch_busy, 1)) {
		__sync_fetch_and_add(&c->drop_ringbuf, 1);
		__sync_fetch_and_add(&c->drop_busy, 1);
		return;
	}
	emit_with_scratch(ctx, c, owner, id, call, addr, kind, sc);
	__sync_fetch_and_and(&st->scratch_busy, 0); /* release (BPF has no plain atomic store) */
}

static __always_inline void emit_with_scratch(struct pt_regs *ctx, struct mt_counts *c,
					      __u32 owner, __u64 id, struct inflight_call *call,
					      __u64 addr, const enum alloc_kind kind,
					      struct record_scratch *sc)
{
	__u64 seq = __sync_fetch_and_add(&last_seq, 1) + 1;
	struct mt_live_block block = { .seq = seq, .size = call->size };
	struct mt_live_key key = { .addr = addr, .owner = owner };
	/* Into the live map BEFORE the record: whatever userspace has seen is in the map until
	 * freed, which is what reconciliation relies on. (A mapping's lifetime is userspace's:
	 * munmap may cut it in pieces.) */
	if (kind != KIND_MAPPING && bpf_map_update_elem(&live, &key, &block, BPF_ANY)) {
		__sync_fetch_and_add(&c->drop_map_full, 1);
		return;
	}
	__u64 sp = call->entry_sp;
	__u64 room;
	__u64 len = stack_room(sp, &room);
	/* A thread's first copy: its frames end below its thread pointer (glibc: the TCB and the
	 * static TLS at the top of its stack block, x86-64 TLS variant II), not at the end of the
	 * mapping. The main thread's TLS is elsewhere: fsbase is then not above sp in reach. */
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 fs = BPF_CORE_READ(task, thread.fsbase);
	if (fs > sp && fs - sp < len)
		len = fs - sp;
	__u32 tid = (__u32)id;
	__u64 *end = bpf_map_lookup_elem(&stack_ends, &tid);
	if (end && *end > sp && *end - sp + STACK_END_SLACK < len)
		len = *end - sp + STACK_END_SLACK;
	struct mt_cpu_state *st = this_cpu_state();
	/* a deep stack's pieces go first: tried before them (the common stack is tried after
	 * its copy, for free) */
	st->in_pieces = stacks_in_pieces || (len > MT_STACK_BYTES_MAX &&
			long_copy_wrong(sc->b + sizeof(struct mt_alloc_record), sp));
	st->more_sp = sp;
	st->more_len = len;
	st->more_seq = seq;
	st->more_owner = owner;
	st->more_sent = 0;
	if (len > MT_STACK_BYTES_MAX)
		bpf_loop(MT_STACK_MORE_CHUNKS, more_step, NULL, 0);
	struct mt_alloc_record *r = (struct mt_alloc_record *)sc->b;
	__u8 *stack = sc->b + sizeof(*r);
	__u32 copied = copy_stack(stack, sp, len);
	if (!st->in_pieces && copied >= 8 && long_copy_zero(stack, sp)) {
		st->in_pieces = 1;
		copied = copy_in_pieces(stack, sp, copied);
	}
	if (st->in_pieces)
		__sync_fetch_and_add(&c->stack_recopied, 1);
	r->type = kind == KIND_SAMPLER ? MT_REC_ALLOC_USDT : kind == KIND_MAPPING ? MT_REC_MAP
		: MT_REC_ALLOC;
	r->fn = call->fn;
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->seq = seq;
	r->time_ns = bpf_ktime_get_ns();
	r->addr = addr;
	r->size = call->size;
	r->nsamples = call->nsamples;
	__builtin_memcpy(r->regs, call->regs, sizeof(r->regs));
	r->owner = owner;
	if (copied > MT_STACK_BYTES_MAX)
		copied = MT_STACK_BYTES_MAX;
	__u8 py_status;
	__u32 py_codes;
	__u32 py_n = py_capture(owner, (__u32)id, &sc->py, &py_status, &py_codes);
	if (py_n > MT_PY_MAX_FRAMES)
		py_n = MT_PY_MAX_FRAMES;
	if (py_codes > MT_PY_MAX_NEW)
		py_codes = MT_PY_MAX_NEW;
	__u32 reserved = (copied + 7) & ~7u; /* the Python frames aligned */
	if (reserved > MT_STACK_BYTES_MAX)
		reserved = MT_STACK_BYTES_MAX;
	/* Lengths and offsets bounded where they are used: clang may reload a value from a
	 * spill made before its clamp above, and 6.1's verifier does not carry the clamp over to
	 * the spilled copy ("R2 unbounded memory access"). */
	__u64 frame_bytes = bounded(py_n * sizeof(struct mt_py_frame),
				    MT_PY_MAX_FRAMES * sizeof(struct mt_py_frame));
	__u64 at = bounded(reserved, MT_STACK_BYTES_MAX);
	if (frame_bytes && bpf_probe_read_kernel(stack + at, frame_bytes, sc->py.out))
		py_n = 0;
	__u64 code_bytes = bounded(py_codes * sizeof(struct mt_py_code),
				   MT_PY_MAX_NEW * sizeof(struct mt_py_code));
	at = bounded(reserved + frame_bytes, MT_STACK_BYTES_MAX + MT_PY_MAX_FRAMES * sizeof(struct mt_py_frame));
	if (!py_n || (code_bytes && bpf_probe_read_kernel(stack + at, code_bytes, sc->py.codes)))
		py_codes = 0;
	r->py_frames = (__u16)py_n;
	r->py_status = py_status;
	r->py_codes = (__u8)py_codes;
	r->stack_len = copied;
	r->stack_reserved = reserved;
	r->stack_more = copied == MT_STACK_BYTES_MAX ? st->more_sent : 0; /* else not its pieces */
	r->pad = 0;
	if (kind == KIND_PROBE && copied >= 8) {
		/* The return probe replaced the return address at entry_sp by its trampoline; at
		 * the return the kernel has set ip back to the real one. */
		__u64 ret_addr = PT_REGS_IP(ctx);
		__builtin_memcpy(stack, &ret_addr, sizeof(ret_addr));
	}
	if (kind == KIND_PROBE ? copied < 8 : copied == 0)
		__sync_fetch_and_add(&c->drop_stack_copy, 1);
	__u64 pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = sizeof(*r) + (reserved & (2 * MT_STACK_BYTES_MAX - 1)) +
		     py_n * sizeof(struct mt_py_frame) + py_codes * sizeof(struct mt_py_code);
	if (size > sizeof(sc->b))
		size = sizeof(sc->b);
	if (bpf_ringbuf_output(&events, sc->b, size,
			       pending >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP)) {
		__sync_fetch_and_add(&c->drop_ringbuf, 1);
		if (kind != KIND_MAPPING)
			bpf_map_delete_elem(&live, &key);
		return;
	}
	__sync_fetch_and_add(&c->samples, 1);
}

/* Return of a call whose entry kept a return probe. match_call: fallback mode, where every
 * call has a uretprobe; only the one that matches the in-flight entry is ours. */
static __always_inline void on_alloc_return(struct pt_regs *ctx, bool match_call)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 owner = MT_COOKIE_OWNER(cookie);
	struct mt_counts *c;
	if (!slot_of(owner, id >> 32, &c))
		return;
	__u32 tid = (__u32)id;
	struct inflight_call *call = bpf_map_lookup_elem(&inflight, &tid);
	if (!call)
		return;
	if (match_call && (MT_COOKIE_FN(cookie) != call->fn ||
			   PT_REGS_SP(ctx) != call->entry_sp + 8))
		return;
	__u64 addr = PT_REGS_RC(ctx);
	if (call->fn == MT_FN_POSIX_MEMALIGN) {
		__u64 result = addr;
		addr = 0;
		if ((int)result == 0)
			bpf_probe_read_user(&addr, sizeof(addr), (void *)call->memptr);
	}
	/* xallocx returns the block's usable size: resized in place when it is >= the size
	 * asked for, else unchanged. */
	if (call->fn == MT_FN_XALLOCX)
		addr = addr >= call->size ? call->memptr : 0;
	/* realloc: the old block is gone when a new one was returned (moved or resized in place:
	 * a free plus a new allocation) or when realloc(p, 0) freed it; reallocf frees it when it
	 * fails too. glibc frees through the probed free, which then reported it already: the seq
	 * check keeps it single. */
	bool old_gone = addr || call->fn == MT_FN_REALLOCF ||
			(call->size == 0 && (call->fn == MT_FN_REALLOC || call->fn == MT_FN_REALLOCARRAY));
	if (call->old_ptr && old_gone) {
		struct mt_live_key old_key = {.addr = call->old_ptr, .owner = owner};
		struct mt_live_block *old = bpf_map_lookup_elem(&live, &old_key);
		if (old && old->seq == call->old_seq && bpf_map_delete_elem(&live, &old_key) == 0)
			emit_free(c, owner, id, call->old_seq, call->old_ptr);
	}
	if (call->nsamples && addr)
		emit_alloc(ctx, c, owner, id, call, addr, KIND_PROBE);
	bpf_map_delete_elem(&inflight, &tid);
}

SEC("uprobe")
int alloc_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return()) {
		on_alloc_return(ctx, false);
		return 0;
	}
	int skip_return = on_alloc_entry(ctx);
	/* Keeps clang from folding the result into `r0 ^= 1`, which the verifier rejects. */
	asm volatile("" : "+r"(skip_return));
	return skip_return ? 1 : 0;
}

SEC("uprobe")
int alloc_entry(struct pt_regs *ctx)
{
	on_alloc_entry(ctx);
	return 0;
}

SEC("uretprobe")
int alloc_return(struct pt_regs *ctx)
{
	on_alloc_return(ctx, true);
	return 0;
}

/* free and the other free-likes (operator delete, dallocx, sdallocx, cfree), probed at their
 * entry or a later site where %rdi still is the pointer (after the NULL test...). */
SEC("uprobe")
int free_probe(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 owner = MT_COOKIE_OWNER(bpf_get_attach_cookie(ctx));
	struct mt_counts *c;
	if (!slot_of(owner, id >> 32, &c))
		return 0;
	__sync_fetch_and_add(&c->free_calls, 1);
	struct mt_live_key key = {.addr = PT_REGS_PARM1(ctx), .owner = owner};
	struct mt_live_block *block = bpf_map_lookup_elem(&live, &key);
	if (!block)
		return 0;
	__u64 seq = block->seq;
	if (bpf_map_delete_elem(&live, &key)) /* another path reported it */
		return 0;
	emit_free(c, owner, id, seq, key.addr);
	return 0;
}

/* The benchmark floor: the same sites, empty programs. */
SEC("uprobe")
int floor_session(struct pt_regs *ctx)
{
	return 1;
}

SEC("uprobe")
int floor_entry(struct pt_regs *ctx)
{
	return 0;
}

SEC("uretprobe")
int floor_return(struct pt_regs *ctx)
{
	return 0;
}

SEC("uprobe")
int floor_free(struct pt_regs *ctx)
{
	return 0;
}

#include "usdt_probes.bpf.h"
#include "mapping_probes.bpf.h"
