/* Included by memtraced.bpf.c (its maps and helpers): anonymous memory mappings as
 * allocations.
 *
 * Tracepoint programs on the mmap, munmap and mremap system calls (enter: the arguments kept
 * in task storage; exit: the result), global, filtered by tgid; a mapping is not an
 * allocator call, so they run in every mode, --inject included. (fentry/fexit would take one
 * program per call, but this kernel refuses them: no kprobes, ftrace closed.) A
 * successful anonymous mmap (MAP_ANONYMOUS, private or shared, not PROT_NONE: a reservation is
 * not memory), mremap, or mprotect that makes part of a reservation usable is sampled with the
 * same byte countdown as malloc'ed blocks and recorded as MT_REC_MAP with the user registers
 * and stack at the system call. Its lifetime is userspace's (munmap may cut it in pieces):
 * from the first sampled mapping on, every successful munmap, every mremap's old range, the
 * range a MAP_FIXED mapping replaces, a range made PROT_NONE again and a range given back with
 * madvise(MADV_DONTNEED or MADV_FREE) are sent as MT_REC_UNMAP, and userspace frees or trims the
 * sampled mappings they cover. Which mappings are an allocator's own (glibc's mmap for a large
 * malloc, jemalloc's extents) is decided in userspace from the caller (see the session). */

#define MT_MAP_FIXED 0x10
#define MT_MAP_ANONYMOUS 0x20
#define MT_MAP_FIXED_NOREPLACE 0x100000

/* A slot's mapping_sampled is set at its first sampled mapping: unmappings are reported
 * from then on. */

static __always_inline bool syscall_failed(long ret)
{
	return (unsigned long)ret >= (unsigned long)-4095L;
}

static __always_inline void emit_unmap(struct mt_counts *c, __u32 owner, __u64 id, __u64 addr,
				       __u64 len)
{
	struct mt_unmap_record *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) { /* the mapping stays live in the trace: counted like a lost free */
		__sync_fetch_and_add(&c->drop_ringbuf, 1);
		return;
	}
	r->type = MT_REC_UNMAP;
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->owner = owner;
	r->addr = addr;
	r->len = len;
	r->time_ns = bpf_ktime_get_ns();
	submit(r);
}

static long vma_anonymous(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	*(bool *)data = vma->vm_file == NULL;
	return 0;
}

/* An anonymous mapping with no access: a reservation of address space, not memory. */
static long vma_reserved(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	*(__u64 *)data = vma->vm_file == NULL && !(vma->vm_flags & (0x1 | 0x2 | 0x4));
	return 0;
}

static __always_inline void sample_mapping(struct mt_slot *sl, struct mt_counts *c, __u32 owner,
					   __u64 id, __u64 addr, __u64 len)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct mt_cpu_state *st = this_cpu_state();
	__sync_fetch_and_add(&c->map_calls, 1);
	__u64 n = sample_points(st, len);
	if (!n)
		return;
	__u32 key = 0;
	struct inflight_call *call = bpf_map_lookup_elem(&call_scratch, &key);
	if (!call)
		return;
	copy_entry_regs(call->regs, regs);
	call->entry_sp = regs->sp;
	call->size = len;
	call->nsamples = n;
	call->fn = 0;
	sl->mapping_sampled = 1;
	emit_alloc(regs, c, owner, id, call, addr, KIND_MAPPING);
}

/* A system call's arguments, from its enter to its exit (per thread). */
struct mapping_call {
	__u64 args[4];
	__u32 nr;      /* which call: 0 none */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mapping_call);
} mapping_calls SEC(".maps");

enum { CALL_MMAP = 1, CALL_MUNMAP, CALL_MREMAP, CALL_MPROTECT, CALL_MADVISE };
#define MT_MADV_DONTNEED 4
#define MT_MADV_FREE 8

static __always_inline int enter(struct trace_event_raw_sys_enter *ctx, __u32 nr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 owner;
	struct mt_counts *cnt;
	struct mt_slot *sl = slot_of_tgid(id >> 32, &owner, &cnt);
	if (!sl)
		return 0;
	/* mmap and mprotect can make memory; munmap, mremap and madvise only matter once one was
	 * sampled (and madvise only to give memory back) */
	if (nr != CALL_MMAP && nr != CALL_MPROTECT && !sl->mapping_sampled)
		return 0;
	if (nr == CALL_MADVISE && ctx->args[2] != MT_MADV_DONTNEED && ctx->args[2] != MT_MADV_FREE)
		return 0;
	struct mapping_call *c = bpf_task_storage_get(&mapping_calls, bpf_get_current_task_btf(), 0,
						      BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return 0;
	/* only the arguments the call has: the kernel refuses a program that reads past the
	 * end of the event (munmap's has two) */
	c->nr = nr;
	c->args[0] = ctx->args[0];
	c->args[1] = ctx->args[1];
	if (nr != CALL_MUNMAP)
		c->args[2] = ctx->args[2];
	if (nr == CALL_MMAP || nr == CALL_MREMAP)
		c->args[3] = ctx->args[3];
	if (nr == CALL_MPROTECT) { /* (start, len, prot): was the start a reservation? */
		__u64 reserved = 0; /* the callback's data must be on the stack */
		bpf_find_vma(bpf_get_current_task_btf(), c->args[0], vma_reserved, &reserved, 0);
		c->args[3] = reserved;
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int mmap_enter(struct trace_event_raw_sys_enter *ctx) { return enter(ctx, CALL_MMAP); }
SEC("tracepoint/syscalls/sys_enter_munmap")
int munmap_enter(struct trace_event_raw_sys_enter *ctx) { return enter(ctx, CALL_MUNMAP); }
SEC("tracepoint/syscalls/sys_enter_mremap")
int mremap_enter(struct trace_event_raw_sys_enter *ctx) { return enter(ctx, CALL_MREMAP); }
SEC("tracepoint/syscalls/sys_enter_mprotect")
int mprotect_enter(struct trace_event_raw_sys_enter *ctx) { return enter(ctx, CALL_MPROTECT); }
SEC("tracepoint/syscalls/sys_enter_madvise")
int madvise_enter(struct trace_event_raw_sys_enter *ctx) { return enter(ctx, CALL_MADVISE); }

/* One program for the three exits (each program with a record writer costs the verifier
 * ~30 ms at every load): what the call was comes from its enter.
 *   mmap(addr, len, prot, flags, fd, off)
 *   munmap(addr, len)
 *   mremap(old_addr, old_len, new_len, flags, new_addr): the old range is gone (moved, or
 *   resized in place: a free and a new allocation, as realloc), the new one is a mapping of
 *   new_len bytes, anonymous or not. */
SEC("tracepoint/syscalls/sys_exit_mmap")
int mapping_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 owner;
	struct mt_counts *cnt;
	struct mt_slot *sl = slot_of_tgid(id >> 32, &owner, &cnt);
	if (!sl)
		return 0;
	bool mapping_sampled = sl->mapping_sampled;
	struct mapping_call *c = bpf_task_storage_get(&mapping_calls, bpf_get_current_task_btf(), 0, 0);
	if (!c || !c->nr)
		return 0;
	__u32 nr = c->nr;
	c->nr = 0;
	long ret = ctx->ret;
	if (syscall_failed(ret))
		return 0;
	__u64 len = c->args[1];
	bool anon = false;
	if (nr == CALL_MUNMAP) {
		emit_unmap(cnt, owner, id, c->args[0], len);
		return 0;
	}
	if (nr == CALL_MADVISE) {
		/* MADV_DONTNEED / MADV_FREE: the range's memory is given back (the mapping stays;
		 * what is touched again later, with no system call, is not seen) */
		emit_unmap(cnt, owner, id, c->args[0], len);
		return 0;
	}
	if (nr == CALL_MPROTECT) {
		/* A reservation's range made usable is memory made now; a usable range made
		 * PROT_NONE again is freed (a JIT's RW <-> RX flips are neither). */
		if (c->args[3] && c->args[2] != 0)
			sample_mapping(sl, cnt, owner, id, c->args[0], len);
		else if (!c->args[3] && c->args[2] == 0 && mapping_sampled)
			emit_unmap(cnt, owner, id, c->args[0], len);
		return 0;
	}
	if (nr == CALL_MMAP) {
		__u64 flags = c->args[3];
		if ((flags & (MT_MAP_FIXED | MT_MAP_FIXED_NOREPLACE)) && mapping_sampled)
			emit_unmap(cnt, owner, id, (__u64)ret, len); /* what it replaced is gone */
		/* PROT_NONE: a reservation of address space (V8's code range, an allocator's
		 * arena, a Go or Java heap), not memory; the part made usable later by a MAP_FIXED
		 * mmap over it is a mapping of its own and counted (by mprotect: not seen) */
		anon = (flags & MT_MAP_ANONYMOUS) && c->args[2] != 0;
	} else { /* CALL_MREMAP */
		if (mapping_sampled)
			emit_unmap(cnt, owner, id, c->args[0], len);
		len = c->args[2];
		bpf_find_vma(bpf_get_current_task_btf(), (__u64)ret, vma_anonymous, &anon, 0);
	}
	if (anon)
		sample_mapping(sl, cnt, owner, id, (__u64)ret, len);
	return 0;
}
