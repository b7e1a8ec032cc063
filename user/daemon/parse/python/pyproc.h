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
#include "protocol/stack_types.h"

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
 * f->ident no longer matches) or cannot be read, or PY_OVER_BUDGET when naming it would
 * take more memory than the budget allows (below). */
#define PY_OVER_BUDGET (-2)
int pyproc_locate(struct pyproc *p, const struct mt_py_frame *f, struct py_location *out);

/* The names of a code object, as the BPF program copied them from a sample (kept unless
 * known already). */
void pyproc_learn(struct pyproc *p, const struct mt_py_code *c);

/* The memory the names and line tables of code objects may take in the parser (issue 35: a
 * forged runtime made it keep 256 KiB per code object, a million of them): PY_BUDGET_PROCESS
 * per process and PY_BUDGET_ALL for all processes together (protocol/stack_types.h). A code object past it is not
 * read (PY_OVER_BUDGET), and counted: pyproc_over_budget. */
uint64_t pyproc_over_budget(const struct pyproc *p);
/* For tests: another budget per process than PY_BUDGET_PROCESS (for all processes opened
 * after the call); a pyproc of no process, for pyproc_learn and pyproc_locate; the bytes kept. */
void pyproc_set_budget(size_t per_process);
struct pyproc *pyproc_for_test(void);
size_t pyproc_bytes(const struct pyproc *p);

/* For tests: the line of the instruction at byte offset addr of a code object whose location
 * table is table (3.11+'s format), first line firstlineno. */
int py_addr_to_line(const uint8_t *table, size_t len, int firstlineno, int addr);

#endif
