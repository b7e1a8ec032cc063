/* The records that cross the BPF ring buffer, from bpf/memtraced.bpf.c to user/daemon/core/tracer/tracer_intake.c,
 * and the per-CPU state both sides read. Nothing else crosses.
 *
 * Included by the BPF program (with vmlinux.h, which defines __u32/__u64) and by userspace
 * (with <linux/types.h>). Keep the layouts free of implicit padding.
 */
#ifndef MEMTRACED_EVENTS_H
#define MEMTRACED_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define MT_NREGS 17                    /* DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
#define MT_REG_RSP 7
#define MT_REG_RIP 16

#define MT_STACK_BYTES_DEFAULT 1048576u /* a copy stops at the end of the stack's mapping: a
                                         shallow stack costs only its depth */
#define MT_STACK_BYTES_MAX 65536u      /* one ring-buffer record holds at most this much stack */
#define MT_STACK_BYTES_LIMIT 1048576u  /* --stack-bytes at most: the first MT_STACK_BYTES_MAX in
                                          the record, the rest in MT_REC_STACK_MORE records (a
                                          trace holds ~1024 frames of a stack anyway) */
#define MT_STACK_MORE_CHUNKS (MT_STACK_BYTES_LIMIT / MT_STACK_BYTES_MAX - 1)
#define MT_MAX_CPUS 1024               /* per-CPU slots in global data (index is cpu & (MAX-1)) */
#define MT_EXP_TABLE 4096              /* precomputed exponential gaps, indexed by prandom */

/* One BPF object serves many traced processes (user/daemon/core/tracer/tracer_host.c): each
 * tracer holds a slot of it. An owner names one use of a slot: slot | gen << 16, gen >= 1, so
 * that a record or live block of a slot's former tracer is never taken for its new one's.
 * Uprobe links carry their owner in the attach cookie (fn | owner << 32); the system call
 * tracepoints and USDT probes find it by tgid (map tgid_owner). */
#define MT_MAX_SLOTS 256
#define MT_OWNER_SLOT(o) ((o) & (MT_MAX_SLOTS - 1))
#define MT_COOKIE(fn, owner) ((__u64)(fn) | (__u64)(owner) << 32)
#define MT_COOKIE_FN(c) ((__u32)(c) & 0xff)
#define MT_COOKIE_OWNER(c) ((__u32)((c) >> 32))

/* The probed function, passed as the attach cookie and in records: the same values as
 * enum alloc_fn in user/daemon/shared/protocol/allocfn.h (tracer.c checks it at compile time). */
enum mt_fn {
	MT_FN_MALLOC, MT_FN_CALLOC, MT_FN_REALLOC, MT_FN_REALLOCARRAY, MT_FN_FREE,
	MT_FN_POSIX_MEMALIGN, MT_FN_ALIGNED_ALLOC, MT_FN_MEMALIGN, MT_FN_VALLOC, MT_FN_PVALLOC,
	/* C++ operator new: size first (aligned forms: alignment second) */
	MT_FN_NEW, MT_FN_NEW_ARRAY, MT_FN_NEW_NOTHROW, MT_FN_NEW_ARRAY_NOTHROW, MT_FN_NEW_ALIGNED,
	MT_FN_NEW_ARRAY_ALIGNED, MT_FN_NEW_ALIGNED_NOTHROW, MT_FN_NEW_ARRAY_ALIGNED_NOTHROW,
	/* C++ operator delete (12 forms): the pointer first, handled like free */
	MT_FN_DELETE_FIRST, MT_FN_DELETE_LAST = MT_FN_DELETE_FIRST + 11,
	/* jemalloc: mallocx(size, flags), rallocx(ptr, size, flags), xallocx(ptr, size, extra,
	 * flags) -> usable size (resized in place when >= size), dallocx, sdallocx */
	MT_FN_MALLOCX, MT_FN_RALLOCX, MT_FN_XALLOCX, MT_FN_DALLOCX, MT_FN_SDALLOCX,
	MT_FN_CFREE,
	MT_FN_REALLOCF,  /* realloc that frees the old block when it fails (mimalloc) */
	MT_FN_COUNT
};

enum mt_record_type {
	MT_REC_ALLOC = 1,  /* struct mt_alloc_record, followed by stack bytes */
	MT_REC_FREE = 2,   /* struct mt_free_record */
	MT_REC_ALLOC_USDT = 3, /* struct mt_alloc_record from an in-process sampler's USDT probe:
	                        * regs and stack at the probe site, inside the sampler */
	MT_REC_MAP = 4,    /* struct mt_alloc_record: a sampled anonymous mmap/mremap; regs and
	                    * stack are the user's at the system call; not in the live map */
	MT_REC_UNMAP = 5,  /* struct mt_unmap_record: a range unmapped (munmap, mremap's old range,
	                    * what a MAP_FIXED mapping replaced) */
	MT_REC_STACK_MORE = 6, /* struct mt_stack_more_record: a deep stack's bytes beyond the
	                        * first MT_STACK_BYTES_MAX, written just before its alloc record */
};

/* One sampled allocation, written at the allocation function's RETURN (only successful
 * allocations). regs are the registers as at the function's ENTRY (copied there); stack is
 * the user stack copied at the return from the entry's rsp: the caller frames are unchanged
 * while the callee runs, and the first 8 bytes (the return address, which the kernel's
 * return probe replaced by its trampoline) are put back to the real return address. */
struct mt_alloc_record {
	__u32 type;            /* MT_REC_ALLOC */
	__u32 fn;              /* enum alloc_fn of the probed function */
	__u32 pid, tid;
	__u64 seq;             /* unique per tracer (a global counter in the BPF program) */
	__u64 time_ns;         /* bpf_ktime_get_ns() at the return */
	__u64 addr, size, nsamples;
	__u64 regs[MT_NREGS];
	__u32 owner;           /* the tracer's slot and generation (MT_MAX_SLOTS) */
	__u16 py_frames;       /* struct mt_py_frame after the stack bytes (python_frames.h) */
	__u8 py_status;        /* enum mt_py_status */
	__u8 py_codes;         /* struct mt_py_code after the frames */
	__u32 stack_len;       /* valid bytes in stack[] */
	__u32 stack_reserved;  /* bytes reserved for stack[] in this record; py_frames Python
	                          frames follow them */
	__u32 stack_more;      /* stack bytes past stack_len, in the MT_REC_STACK_MORE records of
	                          this seq that came just before (0: none; stack_len is then whole) */
	__u32 pad;
	__u8 stack[];
};

/* A deep stack's next piece: bytes [offset, offset + len) from the sampled sp. The pieces of
 * one sample come in order, right before its MT_REC_ALLOC* record on the same ring (other
 * threads' records may come between); a piece that could not be written ends them, and the
 * alloc record's stack_more says how many bytes arrived. */
struct mt_stack_more_record {
	__u32 type;            /* MT_REC_STACK_MORE */
	__u32 owner;
	__u32 pid, tid;
	__u64 seq;             /* the seq of the alloc record it belongs to */
	__u32 offset, len;
	__u8 data[];
};

/* A free of a sampled block (free(), or realloc moving/freeing it). */
struct mt_free_record {
	__u32 type;            /* MT_REC_FREE */
	__u32 pid, tid;
	__u32 owner;
	__u64 seq;             /* the seq of the block's MT_REC_ALLOC */
	__u64 addr;
	__u64 time_ns;
};

/* An unmapped range: the sampled mappings it covers are freed or trimmed (userspace). */
struct mt_unmap_record {
	__u32 type;            /* MT_REC_UNMAP */
	__u32 pid, tid;
	__u32 owner;
	__u64 addr, len;
	__u64 time_ns;
};

/* Key and value of the live map: the BPF map is the truth about which sampled blocks are
 * live. */
struct mt_live_key {
	__u64 addr;
	__u32 owner;
	__u32 pad;
};

struct mt_live_block {
	__u64 seq;
	__u64 size;
};

/* Per-CPU state in the program's global data (.bss), one cache line pair per CPU. Counters are
 * added atomically (a program can be preempted on a PREEMPT kernel); userspace sums them. */
struct mt_cpu_state {
	__u64 countdown;       /* bytes until the next sample point (0 = not drawn yet); one
	                          byte stream for every process: it stays a Poisson process */
	/* Backup nest guard for UNSAMPLED calls of functions that may call another probed
	 * function (realloc -> malloc...), see the BPF program. */
	__u64 nest_sp;         /* its rsp at entry (where its return address is) */
	__u64 nest_ret;        /* its return address */
	__u64 nest_ip;         /* its entry address */
	__u32 nest_tid;
	__u32 nest_fn;
	__u64 scratch_busy;    /* the CPU's record buffer is in use (a preempted program) */
	/* the block of sampled calls under way while a slot thins (mt_slot.thin): calls left in
	 * it, its factor, the one kept (stratified: one in exactly k, drawn at random) */
	__u32 thin_left, thin_k, thin_pick, thin_pad;
	/* a deep stack's pieces being sent (under scratch_busy): where the copy starts, its
	 * length, the sample's seq and owner, the bytes sent past the first record's */
	__u64 more_sp, more_len, more_seq;
	__u32 more_owner, more_sent;
	__u64 in_pieces;       /* the record under way copies its stack in pieces (bpf:
	                          long_copy_wrong) */
} __attribute__((aligned(64)));

/* A slot's counters (a per-CPU array indexed by slot; userspace sums the CPUs and zeroes
 * them when it hands the slot out). */
struct mt_counts {
	__u64 alloc_calls;     /* probe hits of allocation functions (nested ones included) */
	__u64 free_calls;      /* probe hits of free (after its NULL test) */
	__u64 samples;         /* MT_REC_ALLOC records submitted */
	__u64 nested_skipped;  /* calls recognized as nested in another probed call: not counted */
	__u64 drop_ringbuf;    /* records lost because the ring buffer was full */
	__u64 drop_map_full;   /* samples lost because the live or in-flight map was full */
	__u64 drop_stack_copy; /* samples submitted without stack (copy failed even at 1 KiB) */
	__u64 map_calls;       /* successful anonymous mmap/mremap calls */
	__u64 drop_busy;       /* of drop_ringbuf: the CPU's record buffer was in use (a
	                          preempted program of another process, on this CPU) */
	__u64 stack_recopied;  /* samples whose stack was copied in pieces: a long copy read
	                          zeros where the stack has a word (bpf: long_copy_wrong) */
};

/* A slot's state (global data, written by userspace but mapping_sampled). */
struct mt_slot {
	__u32 tgid;            /* the traced process (0: none yet) */
	__u32 owner;           /* the current owner; a link or record of another is stale */
	__u32 muted;           /* the process exec'd: these probes stop at once */
	__u32 mapping_sampled; /* a mapping was sampled: unmappings are reported from then on */
	__u32 thin;            /* backpressure (issue 37): > 1, 1 sample point in thin is kept, its
	                          nsamples multiplied by thin (userspace raises and lowers it) */
	__u32 pad;
};

#endif
