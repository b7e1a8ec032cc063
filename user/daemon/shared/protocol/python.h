/* What the parser found of a process's CPython interpreter (parse/python/), as it crosses to
 * the daemon: whether its Python frames can be captured, the layout the BPF program walks
 * with (include/python_frames.h), and a note that says why not. */
#ifndef MEMTRACED_PROTOCOL_PYTHON_H
#define MEMTRACED_PROTOCOL_PYTHON_H
#include <stdbool.h>
#include <stdint.h>

#include "python_frames.h"

/* --python: what a Python process's stacks show. */
enum py_mode {
	PY_MODE_AUTO,  /* Python frames in place of the eval loop's activations, native frames kept */
	PY_MODE_NO,    /* native frames only: nothing is captured */
	PY_MODE_ONLY,  /* Python frames, and the native frames of everything but the interpreter */
};

struct py_found {
	bool found;               /* a CPython interpreter is mapped (exe or libpython) */
	bool usable;              /* its layout is known: layout is set */
	uint32_t version;         /* 0x030b...: major << 8 | minor */
	char object[256];         /* the interpreter's file, as mapped */
	char source[32];          /* where the layout came from: "its _Py_DebugOffsets", "its
	                             DWARF", "the built-in table" */
	char note[256];           /* found but not usable: why */
	struct mt_py_layout layout;
};

#endif
