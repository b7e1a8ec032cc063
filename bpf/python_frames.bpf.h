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
	__u64 found;      /* the thread's state in use */
	__u64 any;        /* the first of the thread's states (it has one per interpreter) */
	__u32 tid;
	__u16 off_tid, off_next, off_status;
	int failed;
};

/* The code objects whose names a record of their process carried already (struct
 * mt_py_code): later records carry only their addresses. */
struct py_seen_key {
	__u64 code, ident;
	__u32 owner, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_seen_key);
	__type(value, __u32);
} py_seen SEC(".maps");

struct py_walk {            /* no pointers: it lives in a map value */
	__u64 frame;
	__u32 n, ncodes, owner;
	__u16 off_prev, off_code, off_instr, off_owner, off_entry, cstack, off_ident;
	int status;
};

/* The loops' state lives in the record scratch (struct py_state): the BPF stack of a program
 * and its loop callback together is 512 bytes. Their context is a pointer to it. */
struct py_state {
	struct mt_py_layout layout; /* a copy: the walk's callbacks cannot keep a map's pointer */
	struct py_find find;
	struct py_walk walk;
	struct py_seen_key key;
	struct mt_py_frame out[MT_PY_MAX_FRAMES];
	struct mt_py_code codes[MT_PY_MAX_NEW];
};

static __always_inline struct py_find *find_of(void *data)
{
	return &(*(struct py_state **)data)->find;
}

static long py_find_step(__u32 i, void *data)
{
	struct py_find *f = find_of(data);
	if (!f->t)
		return 1;
	__u64 ntid;
	if (py_read_u64(&ntid, f->t + f->off_tid)) {
		f->failed = 1;
		return 1;
	}
	if (ntid == f->tid) {
		__u32 status = 0;
		if (f->off_status == MT_PY_NONE ||
		    (!bpf_probe_read_user(&status, sizeof(status), (void *)(f->t + f->off_status)) &&
		     (status & MT_PY_ACTIVE))) {
			f->found = f->t;
			return 1;
		}
		if (!f->any)
			f->any = f->t;
	}
	if (py_read_u64(&f->t, f->t + f->off_next)) {
		f->failed = 1;
		return 1;
	}
	return 0;
}

/* Is the cached thread state t still tid's, and the one in use? */
static __always_inline bool py_tstate_current(const struct mt_py_layout *L, __u64 t, __u32 tid)
{
	__u64 ntid;
	__u32 status = 0;
	if (py_read_u64(&ntid, t + L->tstate_native_tid) || ntid != tid)
		return false;
	return L->tstate_status == MT_PY_NONE ||
	       (!bpf_probe_read_user(&status, sizeof(status), (void *)(t + L->tstate_status)) &&
		(status & MT_PY_ACTIVE));
}

/* The thread state of tid: from the cache when its native thread id still says so (and it is
 * the one in use), else searched in every interpreter's thread list: the one in use, else the
 * first (a thread that released the GIL has none in use). 0 when there is none. */
static __always_inline __u64 py_thread_state(const struct mt_py_layout *L, __u32 owner,
					     __u32 tid, struct py_state *st, int *failed)
{
	struct py_tstate_hit *hit = bpf_map_lookup_elem(&py_tstates, &tid);
	if (hit && hit->owner == owner && py_tstate_current(L, hit->tstate, tid))
		return hit->tstate;
	struct py_find *f = &st->find;
	f->t = f->found = f->any = 0;
	f->tid = tid;
	f->off_tid = L->tstate_native_tid;
	f->off_next = L->tstate_next;
	f->off_status = L->tstate_status;
	f->failed = 0;
	__u64 interp;
	if (py_read_u64(&interp, L->runtime + L->runtime_interp_head)) {
		*failed = 1;
		return 0;
	}
	for (int i = 0; i < MT_PY_MAX_INTERPS && interp && !f->found && !f->failed; i++) {
		if (py_read_u64(&f->t, interp + L->interp_threads_head) ||
		    py_read_u64(&interp, interp + L->interp_next)) {
			f->failed = 1;
			break;
		}
		bpf_loop(MT_PY_MAX_THREADS, py_find_step, &st, 0);
	}
	*failed = f->failed;
	if (f->found) {
		struct py_tstate_hit h = {.tstate = f->found, .owner = owner};
		bpf_map_update_elem(&py_tstates, &tid, &h, BPF_ANY);
	}
	return f->found ? f->found : f->any;
}

/* A compact ASCII str into dst (at most cap bytes): its length, or MT_PY_NOT_ASCII. */
static __always_inline __u16 py_copy_str(char *dst, __u32 cap, __u64 str,
					 const struct mt_py_layout *L)
{
	__u32 state = 0;
	__s64 len = 0;
	if (!str || bpf_probe_read_user(&state, sizeof(state), (void *)(str + L->uni_state)) ||
	    bpf_probe_read_user(&len, sizeof(len), (void *)(str + L->uni_length)) ||
	    !(state >> 5 & 1) || !(state >> 6 & 1) || len < 0)
		return MT_PY_NOT_ASCII;
	__u32 n = len > cap ? cap : (__u32)len;
	if (n > MT_PY_FILE_BYTES)
		n = MT_PY_FILE_BYTES;
	if (n > cap)
		return MT_PY_NOT_ASCII;
	if (bpf_probe_read_user(dst, n, (void *)(str + L->uni_ascii_size)))
		return MT_PY_NOT_ASCII;
	return (__u16)n;
}

/* The names of a code object this process's records have not carried yet, into the next of
 * st->codes: true when it was copied. */
static __always_inline bool py_new_code(struct py_state *st, __u64 code, __u64 ident)
{
	struct py_walk *w = &st->walk;
	struct py_seen_key *k = &st->key;
	__u32 i = w->ncodes;
	if (i >= MT_PY_MAX_NEW || !ident)
		return false;
	k->code = code;
	k->ident = ident;
	k->owner = w->owner;
	k->pad = 0;
	if (bpf_map_lookup_elem(&py_seen, k))
		return false;
	const struct mt_py_layout *L = &st->layout;
	/* bounded again where it is used: clang may reload i from a spill made before the check
	 * above, which 6.1's verifier does not carry over */
	struct mt_py_code *c = &st->codes[bounded(i, MT_PY_MAX_NEW - 1)];
	__u64 file = 0, table = 0;
	__s64 size = 0;
	c->code = code;
	c->ident = ident;
	c->firstlineno = 0;
	bpf_probe_read_user(&c->firstlineno, sizeof(c->firstlineno),
			    (void *)(code + L->code_firstlineno));
	py_read_u64(&file, code + L->code_filename);
	py_read_u64(&table, code + L->code_linetable);
	c->qualname_len = py_copy_str(c->qualname, MT_PY_NAME_BYTES, ident, L);
	c->filename_len = py_copy_str(c->filename, MT_PY_FILE_BYTES, file, L);
	if (c->qualname_len == MT_PY_NOT_ASCII || c->filename_len == MT_PY_NOT_ASCII)
		return false; /* named from the process's memory, as any other */
	if (!table || bpf_probe_read_user(&size, sizeof(size), (void *)(table + L->bytes_size)) ||
	    size < 0)
		size = 0;
	__u32 n = size > MT_PY_TABLE_BYTES ? MT_PY_TABLE_BYTES : (__u32)size;
	if (n > MT_PY_TABLE_BYTES)
		n = MT_PY_TABLE_BYTES;
	if (n && bpf_probe_read_user(c->table, n, (void *)(table + L->bytes_sval)))
		n = 0;
	c->table_size = size > 0xffffffffll ? 0xffffffffu : (__u32)size;
	c->table_len = (__u16)n;
	c->pad = 0;
	__u32 one = 1;
	bpf_map_update_elem(&py_seen, k, &one, BPF_ANY);
	w->ncodes = i + 1;
	return true;
}

/* One frame into slot i (the loop's index: slots are indexed by it, not by a count of the
 * frames kept, which the verifier would track exactly and explore once per value). A frame
 * that is not one of the program's (no code, the eval loop's entry shim) leaves its slot as a
 * placeholder, code 0: userspace skips them, and the ENTRY flag of a shim's placeholder
 * belongs to the frame before it. */
static long py_walk_step(__u32 i, void *data)
{
	struct py_state *st = *(struct py_state **)data;
	struct py_walk *w = &st->walk;
	if (!w->frame)
		return 1;
	__u64 idx = i;
	asm volatile("" : "+r"(idx)); /* checked and used in one register */
	if (idx >= MT_PY_MAX_FRAMES) {
		w->status = MT_PY_CUT;
		return 1;
	}
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
	struct mt_py_frame *f = &st->out[idx];
	w->n = i + 1;
	f->code = 0;
	f->ident = 0;
	f->instr = 0;
	f->flags = 0;
	if (w->cstack != MT_PY_NONE && owner == w->cstack) {
		/* the eval loop's entry shim (3.12+): the frame before it began its activation */
		f->flags = MT_PY_F_ENTRY;
		return 0;
	}
	__u64 type = 0;
	if (!code || py_read_u64(&type, code + st->layout.ob_type) || type != st->layout.code_type)
		return 0; /* no code object: a placeholder */
	f->code = code;
	if (py_read_u64(&f->ident, code + w->off_ident))
		f->ident = 0;
	f->instr = instr >= code && instr - code < 0xffffffffull ? (__u32)(instr - code) : 0xffffffffu;
	f->flags = entry ? MT_PY_F_ENTRY : 0;
	if (py_new_code(st, code, f->ident))
		f->flags |= MT_PY_F_NEW;
	return 0;
}

/* The Python frames of the calling thread into st->out (innermost first): their number,
 * *status (enum mt_py_status), and in st->codes the names of *ncodes code objects not shown
 * yet. */
static __always_inline __u32 py_capture(__u32 owner, __u32 tid, struct py_state *st,
					__u8 *status, __u32 *ncodes)
{
	*ncodes = 0;
	__u32 slot = MT_OWNER_SLOT(owner);
	const struct mt_py_layout *L = bpf_map_lookup_elem(&py_layout, &slot);
	*status = MT_PY_OFF;
	if (!L || !L->owner || L->owner != owner)
		return 0;
	int failed = 0;
	__u64 ts = py_thread_state(L, owner, tid, st, &failed);
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
	st->layout = *L;
	struct py_walk *w = &st->walk;
	w->owner = owner;
	w->frame = frame;
	w->n = w->ncodes = 0;
	w->off_prev = L->frame_previous;
	w->off_code = L->frame_code;
	w->off_instr = L->frame_instr;
	w->off_owner = L->frame_owner;
	w->off_entry = L->frame_is_entry;
	w->cstack = L->owner_cstack;
	w->off_ident = L->code_ident;
	w->status = MT_PY_OK;
	bpf_loop(MT_PY_MAX_FRAMES + 32, py_walk_step, &st, 0); /* + room for entry shims */
	if (w->status == MT_PY_OK && w->frame)
		w->status = MT_PY_CUT;
	*status = (__u8)w->status;
	*ncodes = w->ncodes <= MT_PY_MAX_NEW ? w->ncodes : MT_PY_MAX_NEW;
	return w->n <= MT_PY_MAX_FRAMES ? w->n : MT_PY_MAX_FRAMES;
}
