/* A traced process's CPython interpreter, as the parser reads it: found in the mappings
 * (the executable or a libpython), its layout (pyfind.c: CPython's own _Py_DebugOffsets from
 * 3.13, a built-in table for the release builds of 3.11 and 3.12 checked against the running
 * interpreter), and the names of its code objects (pynames.c: qualified name, file, the line
 * of an instruction from the location table), read from the target's memory in bounded reads
 * and kept per code object.
 *
 * Everything read here is the target's: lengths are capped, a string or table that does not
 * fit is cut, a code object that is not one (its type) gives no name. One thread at a time. */
#ifndef MEMTRACED_PYTHON_PYPROC_H
#define MEMTRACED_PYTHON_PYPROC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/python.h"

struct pyproc;

/* The interpreter of pid (its memory read through mem_fd, kept open by the caller). NULL when
 * the process runs no CPython, or when it cannot be used: *found says which, and why. */
struct pyproc *pyproc_open(pid_t pid, int mem_fd, struct py_found *found);
void pyproc_close(struct pyproc *p);

/* Is pc in an activation of the eval loop (_PyEval_EvalFrameDefault)? */
bool pyproc_in_eval(const struct pyproc *p, uint64_t pc);
/* Is pc in the interpreter's own object (--python=only hides those frames)? */
bool pyproc_in_interpreter(const struct pyproc *p, uint64_t pc);

/* A Python frame's location. The strings live as long as p (until pyproc_close). */
struct py_location {
	const char *filename, *qualname;
	uint32_t line;
	uint64_t hash;           /* of (filename, qualname): with the line, what makes a code */
};
/* The location of frame f: 0, or -1 when its code object is gone (freed, its memory reused:
 * f->ident no longer matches) or cannot be read. */
int pyproc_locate(struct pyproc *p, const struct mt_py_frame *f, struct py_location *out);

/* The names of a code object, as the BPF program copied them from a sample (kept unless
 * known already). */
void pyproc_learn(struct pyproc *p, const struct mt_py_code *c);

/* For tests: the line of the instruction at byte offset addr of a code object whose location
 * table is table (3.11+'s format), first line firstlineno. */
int py_addr_to_line(const uint8_t *table, size_t len, int firstlineno, int addr);

#endif
