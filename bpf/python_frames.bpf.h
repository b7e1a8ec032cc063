/* Included by memtraced.bpf.c: the Python frames of a sampled allocation's thread
 * (include/python_frames.h). Only sampled allocations pay for it, and only in processes whose
 * slot has a layout (the daemon sets py_layout[slot] when the parser found CPython 3.11+).
 * Every read is a bpf_probe_read_user of the target's memory: a wrong offset or a damaged
 * interpreter gives garbage frames (userspace checks each code object) or a failed read,
 * never a fault. */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MT_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct mt_py_layout);
} py_layout SEC(".maps");

/* A thread's PyThreadState, found once: checked on each use by its native thread id (a thread
 * state freed and its memory reused for another thread's fails the check). */
struct py_tstate_hit {
	__u64 tstate;
	__u32 owner;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct py_tstate_hit);
} py_tstates SEC(".maps");

static __always_inline int py_read_u64(__u64 *v, __u64 addr)
{
	*v = 0;
	return bpf_probe_read_user(v, sizeof(*v), (void *)addr);
}

struct py_find {
	__u64 t;          /* the thread state being looked at */
	__u64 found;
	__u32 tid;
	__u16 off_tid, off_next;
	int failed;
};

static long py_find_step(__u32 i, void *data)
{
	struct py_find *f = data;
	if (!f->t)
		return 1;
	__u64 ntid;
	if (py_read_u64(&ntid, f->t + f->off_tid)) {
		f->failed = 1;
		return 1;
	}
	if (ntid == f->tid) {
		f->found = f->t;
		return 1;
	}
	if (py_read_u64(&f->t, f->t + f->off_next)) {
		f->failed = 1;
		return 1;
	}
	return 0;
}

/* The thread state of tid: from the cache when its native thread id still says so, else
 * searched in every interpreter's thread list. 0 when there is none. */
static __always_inline __u64 py_thread_state(const struct mt_py_layout *L, __u32 owner,
					     __u32 tid, int *failed)
{
	struct py_tstate_hit *hit = bpf_map_lookup_elem(&py_tstates, &tid);
	if (hit && hit->owner == owner) {
		__u64 ntid;
		if (!py_read_u64(&ntid, hit->tstate + L->tstate_native_tid) && ntid == tid)
			return hit->tstate;
	}
	struct py_find f = {.tid = tid, .off_tid = L->tstate_native_tid, .off_next = L->tstate_next};
	__u64 interp;
	if (py_read_u64(&interp, L->runtime + L->runtime_interp_head)) {
		*failed = 1;
		return 0;
	}
	for (int i = 0; i < MT_PY_MAX_INTERPS && interp && !f.found && !f.failed; i++) {
		if (py_read_u64(&f.t, interp + L->interp_threads_head) ||
		    py_read_u64(&interp, interp + L->interp_next)) {
			f.failed = 1;
			break;
		}
		bpf_loop(MT_PY_MAX_THREADS, py_find_step, &f, 0);
	}
	*failed = f.failed;
	if (f.found) {
		struct py_tstate_hit h = {.tstate = f.found, .owner = owner};
		bpf_map_update_elem(&py_tstates, &tid, &h, BPF_ANY);
	}
	return f.found;
}

struct py_walk {
	struct mt_py_frame *out;  /* MT_PY_MAX_FRAMES of them */
	__u64 frame;
	__u32 n;
	__u16 off_prev, off_code, off_instr, off_owner, off_entry, cstack, off_ident;
	int status;
};

static long py_walk_step(__u32 i, void *data)
{
	struct py_walk *w = data;
	if (!w->frame)
		return 1;
	__u64 frame = w->frame, code, instr;
	__u8 owner = 0, entry = 0;
	if (py_read_u64(&code, frame + w->off_code) || py_read_u64(&instr, frame + w->off_instr) ||
	    py_read_u64(&w->frame, frame + w->off_prev) ||
	    bpf_probe_read_user(&owner, 1, (void *)(frame + w->off_owner)) ||
	    (w->off_entry != MT_PY_NONE &&
	     bpf_probe_read_user(&entry, 1, (void *)(frame + w->off_entry)))) {
		w->status = MT_PY_READ_FAILED;
		return 1;
	}
	__u32 n = w->n;
	if (w->cstack != MT_PY_NONE && owner == w->cstack) {
		/* the eval loop's entry shim (3.12+): the frame before it began its activation */
		if (n > 0 && n <= MT_PY_MAX_FRAMES)
			w->out[n - 1].flags |= MT_PY_F_ENTRY;
		return 0;
	}
	if (!code)
		return 0;
	if (n >= MT_PY_MAX_FRAMES) {
		w->status = MT_PY_CUT;
		return 1;
	}
	struct mt_py_frame *f = &w->out[n];
	f->code = code;
	if (py_read_u64(&f->ident, code + w->off_ident))
		f->ident = 0;
	f->instr = instr >= code && instr - code < 0xffffffffull ? (__u32)(instr - code) : 0xffffffffu;
	f->flags = entry ? MT_PY_F_ENTRY : 0;
	w->n = n + 1;
	return 0;
}

/* The Python frames of the calling thread into out (innermost first): their number, and
 * *status (enum mt_py_status). */
static __always_inline __u32 py_capture(__u32 owner, __u32 tid, struct mt_py_frame *out,
					__u16 *status)
{
	__u32 slot = MT_OWNER_SLOT(owner);
	const struct mt_py_layout *L = bpf_map_lookup_elem(&py_layout, &slot);
	*status = MT_PY_OFF;
	if (!L || !L->owner || L->owner != owner)
		return 0;
	int failed = 0;
	__u64 ts = py_thread_state(L, owner, tid, &failed);
	if (!ts) {
		*status = failed ? MT_PY_READ_FAILED : MT_PY_NO_THREAD;
		return 0;
	}
	__u64 frame;
	if (py_read_u64(&frame, ts + L->tstate_frame) ||
	    (L->cframe_frame != MT_PY_NONE && frame && py_read_u64(&frame, frame + L->cframe_frame))) {
		*status = MT_PY_READ_FAILED;
		return 0;
	}
	struct py_walk w = {
		.out = out, .frame = frame, .off_prev = L->frame_previous, .off_code = L->frame_code,
		.off_instr = L->frame_instr, .off_owner = L->frame_owner,
		.off_entry = L->frame_is_entry, .cstack = L->owner_cstack, .off_ident = L->code_ident,
		.status = MT_PY_OK,
	};
	bpf_loop(MT_PY_MAX_FRAMES + 32, py_walk_step, &w, 0); /* + room for entry shims */
	if (w.status == MT_PY_OK && w.frame)
		w.status = MT_PY_CUT;
	*status = (__u16)w.status;
	return w.n <= MT_PY_MAX_FRAMES ? w.n : MT_PY_MAX_FRAMES;
}
