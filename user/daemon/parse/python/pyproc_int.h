/* The state pyfind.c and pynames.c share. Not an interface. */
#ifndef MEMTRACED_PYTHON_PYPROC_INT_H
#define MEMTRACED_PYTHON_PYPROC_INT_H
#include "pyproc.h"

/* Offsets userspace reads names with (bytes). */
struct py_objlayout {
	uint16_t ob_type;
	uint16_t code_filename, code_qualname, code_linetable, code_firstlineno, code_adaptive;
	uint16_t uni_state, uni_length, uni_ascii_size, uni_compact_size;
	uint16_t bytes_size, bytes_sval;
};

struct pycode {                /* a code object's names, read once */
	struct pycode *next;
	uint64_t code, ident;
	char *filename, *qualname;
	int firstlineno;
	uint8_t *table;            /* co_linetable */
	uint32_t table_len;
	bool table_cut;            /* a copy cut short (a sample's): read whole when needed */
	uint64_t hash;
};

struct pyproc {
	pid_t pid;
	int mem_fd;
	uint32_t version;
	uint64_t eval_start, eval_end;   /* _PyEval_EvalFrameDefault */
	uint64_t obj_start, obj_end;     /* the interpreter's object, all its mappings */
	uint64_t code_type;              /* &PyCode_Type */
	struct py_objlayout o;
	struct pycode **buckets;
	size_t nbuckets, ncodes;
	size_t bytes;          /* what the kept names and line tables take (pynames.c's budget) */
	uint64_t over_budget;  /* code objects not named: the budget was spent */
};

/* The layout of CPython 3.11 (version 0x030b) or 3.12 (0x030c) release builds on x86-64. */
void py_builtin_layout(uint32_t version, struct mt_py_layout *L, struct py_objlayout *o);
/* The layout from the DWARF of the interpreter's file at path (or its separate debug file):
 * true, or false with a note. */
bool py_layout_from_dwarf(const char *path, uint32_t version, struct mt_py_layout *L,
			  struct py_objlayout *o, char *note, size_t notelen);

/* Reads len bytes of the target at addr: 0, or -1 when not all could be read. */
int py_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len);

#endif
