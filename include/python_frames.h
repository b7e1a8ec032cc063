/* Python frames of a sampled allocation: what the BPF program needs to walk a CPython 3.11+
 * interpreter's frame chain (struct mt_py_layout, per traced process, set by the daemon from
 * what the parser found) and what it copies per frame (struct mt_py_frame, after the stack
 * bytes of an MT_REC_ALLOC record). Shared by bpf/ and user/; no implicit padding.
 *
 * The walk (bpf/python_frames.bpf.h): the thread's PyThreadState is found in the
 * interpreters' thread lists by its native thread id (cached per thread), its innermost
 * _PyInterpreterFrame through tstate->cframe->current_frame (3.11, 3.12) or
 * tstate->current_frame (3.13), then `previous` up to MT_PY_MAX_FRAMES frames. */
#ifndef MEMTRACED_PYTHON_FRAMES_H
#define MEMTRACED_PYTHON_FRAMES_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define MT_PY_MAX_FRAMES 96
#define MT_PY_MAX_INTERPS 8      /* interpreters searched for a thread */
#define MT_PY_MAX_THREADS 1024   /* threads searched per interpreter */
#define MT_PY_NONE 0xffff        /* an offset that does not apply to this version */

/* Offsets in bytes; MT_PY_NONE where a version has no such field. */
struct mt_py_layout {
	__u32 owner;             /* the slot's owner it was set for (0: no Python here) */
	__u32 version;           /* 0x030b, 0x030c, 0x030d */
	__u64 runtime;           /* address of _PyRuntime in the target */
	__u64 code_type;         /* address of PyCode_Type: a frame's code object has it (3.13's
	                            f_executable may be another object) */
	__u16 runtime_interp_head;  /* _PyRuntimeState.interpreters.head */
	__u16 interp_next;          /* PyInterpreterState.next */
	__u16 interp_threads_head;  /* PyInterpreterState.threads.head */
	__u16 tstate_next;          /* PyThreadState.next */
	__u16 tstate_native_tid;    /* PyThreadState.native_thread_id */
	__u16 tstate_frame;         /* .cframe (3.11, 3.12) or .current_frame (3.13) */
	__u16 cframe_frame;         /* _PyCFrame.current_frame; MT_PY_NONE: tstate_frame is it */
	__u16 frame_previous;       /* _PyInterpreterFrame.previous */
	__u16 frame_code;           /* .f_code (3.11, 3.12) or .f_executable (3.13) */
	__u16 frame_instr;          /* .prev_instr (3.11, 3.12) or .instr_ptr (3.13) */
	__u16 frame_owner;          /* .owner (a char) */
	__u16 frame_is_entry;       /* .is_entry (3.11; MT_PY_NONE after) */
	__u16 owner_cstack;         /* owner value of the C stack's entry shims (3.12+; else NONE) */
	__u16 code_ident;           /* PyCodeObject.co_qualname: copied with each frame */
	__u16 code_filename, code_firstlineno, code_linetable; /* .co_filename, ... */
	__u16 uni_state, uni_length, uni_ascii_size;  /* PyASCIIObject.state, .length, its size */
	__u16 bytes_size, bytes_sval;                 /* PyBytesObject.ob_size, .ob_sval */
	__u16 tstate_status;        /* PyThreadState._status (3.12+; else NONE): its bit
	                               MT_PY_ACTIVE says the thread state is the one in use (a
	                               thread has one per interpreter it has entered) */
	__u16 ob_type;              /* PyObject.ob_type */
	__u16 pad;
};

#define MT_PY_ACTIVE 0x10u

/* A code object the program's samples had not shown yet (per process): its names and line
 * table, copied at the sample, so that it is named even when it is gone by the time the
 * sample is handled (an imported module's code, a function of a program that ended). A
 * record carries at most MT_PY_MAX_NEW of them, after its frames. */
#define MT_PY_MAX_NEW 2
#define MT_PY_NAME_BYTES 128
#define MT_PY_FILE_BYTES 256
#define MT_PY_TABLE_BYTES 512
#define MT_PY_NOT_ASCII 0xffff     /* a *_len: not a compact ASCII str (not copied) */
struct mt_py_code {
	__u64 code, ident;
	__s32 firstlineno;
	__u16 qualname_len, filename_len; /* bytes copied, or MT_PY_NOT_ASCII */
	__u32 table_size;                 /* co_linetable's size; table_len of it copied */
	__u16 table_len;
	__u16 pad;
	char qualname[MT_PY_NAME_BYTES];  /* a longer one is cut */
	char filename[MT_PY_FILE_BYTES];
	__u8 table[MT_PY_TABLE_BYTES];    /* lines past a cut table are the first line */
};

/* One Python frame, innermost first. */
struct mt_py_frame {
	__u64 code;              /* the PyCodeObject (3.13: f_executable, checked in userspace) */
	__u64 ident;             /* its co_qualname when it ran: a code object freed and its
	                            memory reused since is not taken for the one that ran */
	__u32 instr;             /* instruction pointer - code, in bytes (0xffffffff: unknown) */
	__u32 flags;             /* MT_PY_F_* */
};

/* The frame is the first its C activation of the eval loop ran: frames past it belong to an
 * outer activation (or the eval loop was entered from C there). */
#define MT_PY_F_ENTRY 1u
/* Its code object's names came in this record (struct mt_py_code). */
#define MT_PY_F_NEW 2u

/* What the walk found (mt_alloc_record.py_status). */
enum mt_py_status {
	MT_PY_OFF = 0,           /* not a Python process, or --python=no */
	MT_PY_OK,                /* py_frames frames (0: a thread running no Python now) */
	MT_PY_CUT,               /* more than MT_PY_MAX_FRAMES: the outer ones are cut */
	MT_PY_NO_THREAD,         /* no thread state of this thread (a thread Python never saw) */
	MT_PY_READ_FAILED,       /* a read of the interpreter's memory failed midway */
};

#endif
