/* Finding a process's CPython interpreter and the layout of its structures.
 *
 * The interpreter is the mapped object (the executable, or a libpython) whose symbols hold
 * _PyRuntime; Py_Version says its version. The layout comes from, in order:
 *  - _Py_DebugOffsets (3.13): the table CPython keeps at the start of _PyRuntime for
 *    out-of-process tools ("xdebugpy"), read from the target's memory;
 *  - for 3.11 and 3.12, the interpreter's DWARF when it has some (pydwarf.c), else
 *    a built-in table, the offsets of CPython's release builds on x86-64
 *    (the same from 3.11.0 to 3.11.x: CPython keeps a release's struct layouts). A build
 *    configured otherwise (a debug build) differs: the table is checked against the running
 *    interpreter (its first interpreter's thread states point back to it, and one of them is
 *    a thread of the process) and refused when it does not fit.
 * When nothing fits the process is traced with native frames, and the note says why. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elfobj.h"
#include "pyproc_int.h"

int py_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	if (p->mem_fd < 0 || addr > INT64_MAX - len) return -1;
	return pread(p->mem_fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

static int read_u64(const struct pyproc *p, uint64_t addr, uint64_t *v)
{
	*v = 0;
	return py_read(p, addr, v, sizeof *v);
}

/* ---- the layouts ---- */

/* CPython 3.11 and 3.12, release builds on x86-64: offsetof against each release's internal
 * headers (checked against pyenv's DWARF by tests/unit/test_pylayout.c). */
static const struct builtin {
	uint32_t version;
	struct mt_py_layout L;
	struct py_objlayout o;
} builtin[] = {
	{0x030b,
	 {.runtime_interp_head = 40, .interp_next = 0, .interp_threads_head = 16, .tstate_next = 8,
	  .tstate_native_tid = 160, .tstate_frame = 56 /* cframe */, .cframe_frame = 8,
	  .frame_previous = 48, .frame_code = 32, .frame_instr = 56 /* prev_instr */,
	  .frame_owner = 69, .frame_is_entry = 68, .owner_cstack = MT_PY_NONE, .code_ident = 128,
	  .tstate_status = MT_PY_NONE /* no "active" bit: a thread's first state */},
	 {.ob_type = 8, .code_filename = 112, .code_qualname = 128, .code_linetable = 136,
	  .code_firstlineno = 72, .code_adaptive = 184, .uni_state = 32, .uni_length = 16,
	  .uni_ascii_size = 48, .uni_compact_size = 72, .bytes_size = 16, .bytes_sval = 32}},
	{0x030c,
	 {.runtime_interp_head = 40, .interp_next = 0, .interp_threads_head = 72, .tstate_next = 8,
	  .tstate_native_tid = 144, .tstate_frame = 56 /* cframe */, .cframe_frame = 0,
	  .frame_previous = 8, .frame_code = 0, .frame_instr = 56 /* prev_instr */,
	  .frame_owner = 70, .frame_is_entry = MT_PY_NONE, .owner_cstack = 3 /* FRAME_OWNED_BY_CSTACK */,
	  .code_ident = 128, .tstate_status = 24 /* _status, after prev, next, interp */},
	 {.ob_type = 8, .code_filename = 112, .code_qualname = 128, .code_linetable = 136,
	  .code_firstlineno = 68, .code_adaptive = 192, .uni_state = 32, .uni_length = 16,
	  .uni_ascii_size = 40, .uni_compact_size = 56, .bytes_size = 16, .bytes_sval = 32}},
};

void py_builtin_layout(uint32_t version, struct mt_py_layout *L, struct py_objlayout *o)
{
	const struct builtin *b = &builtin[version == 0x030b ? 0 : 1];
	*L = b->L;
	*o = b->o;
}

/* _Py_DebugOffsets of 3.13, as 64-bit words (the field's byte offset / 8). */
enum {
	DO_VERSION = 1, DO_FREE_THREADED = 2,
	DO_RT_INTERP_HEAD = 5,
	DO_IS_NEXT = 8, DO_IS_THREADS_HEAD = 9,
	DO_TS_NEXT = 21, DO_TS_CURRENT_FRAME = 23, DO_TS_NATIVE_TID = 25, DO_TS_STATUS = 27,
	DO_FR_PREVIOUS = 29, DO_FR_EXECUTABLE = 30, DO_FR_INSTR_PTR = 31, DO_FR_OWNER = 33,
	DO_CO_FILENAME = 35, DO_CO_QUALNAME = 37, DO_CO_LINETABLE = 38, DO_CO_FIRSTLINENO = 39,
	DO_CO_ADAPTIVE = 43,
	DO_OB_TYPE = 45,
	DO_BY_SIZE = 65, DO_BY_SVAL = 66,
	DO_UN_STATE = 68, DO_UN_LENGTH = 69, DO_UN_ASCII_SIZE = 70,
	DO_WORDS = 73,
};

static bool fits(uint64_t v) { return v < MT_PY_NONE; } /* they are 16-bit in the BPF layout */

static bool debug_offsets(struct pyproc *p, uint64_t runtime, struct mt_py_layout *L,
			  struct py_objlayout *o, char *note, size_t notelen)
{
	uint64_t w[DO_WORDS];
	if (py_read(p, runtime, w, sizeof w) < 0) {
		snprintf(note, notelen, "its _Py_DebugOffsets could not be read");
		return false;
	}
	if (memcmp(w, "xdebugpy", 8) != 0) {
		snprintf(note, notelen, "its _Py_DebugOffsets cookie is not there (a damaged or "
			 "modified interpreter)");
		return false;
	}
	if ((w[DO_VERSION] >> 16 & 0xffff) != 0x030d) {
		snprintf(note, notelen, "_Py_DebugOffsets of version %" PRIx64 " (3.13's layout is "
			 "the one known)", w[DO_VERSION] >> 16 & 0xffff);
		return false;
	}
	if (w[DO_FREE_THREADED]) {
		snprintf(note, notelen, "a free-threaded build (not supported)");
		return false;
	}
	static const int used[] = {DO_RT_INTERP_HEAD, DO_IS_NEXT, DO_IS_THREADS_HEAD, DO_TS_NEXT,
		DO_TS_STATUS,
		DO_TS_CURRENT_FRAME, DO_TS_NATIVE_TID, DO_FR_PREVIOUS, DO_FR_EXECUTABLE,
		DO_FR_INSTR_PTR, DO_FR_OWNER, DO_CO_FILENAME, DO_CO_QUALNAME, DO_CO_LINETABLE,
		DO_CO_FIRSTLINENO, DO_CO_ADAPTIVE, DO_OB_TYPE, DO_BY_SIZE, DO_BY_SVAL, DO_UN_STATE,
		DO_UN_LENGTH, DO_UN_ASCII_SIZE};
	for (size_t i = 0; i < sizeof used / sizeof used[0]; i++)
		if (!fits(w[used[i]])) {
			snprintf(note, notelen, "its _Py_DebugOffsets hold an offset out of bounds");
			return false;
		}
	L->runtime_interp_head = (uint16_t)w[DO_RT_INTERP_HEAD];
	L->interp_next = (uint16_t)w[DO_IS_NEXT];
	L->interp_threads_head = (uint16_t)w[DO_IS_THREADS_HEAD];
	L->tstate_next = (uint16_t)w[DO_TS_NEXT];
	L->tstate_native_tid = (uint16_t)w[DO_TS_NATIVE_TID];
	L->tstate_frame = (uint16_t)w[DO_TS_CURRENT_FRAME];
	L->tstate_status = (uint16_t)w[DO_TS_STATUS];
	L->cframe_frame = MT_PY_NONE;
	L->frame_previous = (uint16_t)w[DO_FR_PREVIOUS];
	L->frame_code = (uint16_t)w[DO_FR_EXECUTABLE];
	L->frame_instr = (uint16_t)w[DO_FR_INSTR_PTR];
	L->frame_owner = (uint16_t)w[DO_FR_OWNER];
	L->frame_is_entry = MT_PY_NONE;
	L->owner_cstack = 3;
	L->code_ident = (uint16_t)w[DO_CO_QUALNAME];
	o->ob_type = (uint16_t)w[DO_OB_TYPE];
	o->code_filename = (uint16_t)w[DO_CO_FILENAME];
	o->code_qualname = (uint16_t)w[DO_CO_QUALNAME];
	o->code_linetable = (uint16_t)w[DO_CO_LINETABLE];
	o->code_firstlineno = (uint16_t)w[DO_CO_FIRSTLINENO];
	o->code_adaptive = (uint16_t)w[DO_CO_ADAPTIVE];
	o->uni_state = (uint16_t)w[DO_UN_STATE];
	o->uni_length = (uint16_t)w[DO_UN_LENGTH];
	o->uni_ascii_size = (uint16_t)w[DO_UN_ASCII_SIZE];
	o->uni_compact_size = (uint16_t)(w[DO_UN_ASCII_SIZE] + 16); /* + utf8_length, utf8 */
	o->bytes_size = (uint16_t)w[DO_BY_SIZE];
	o->bytes_sval = (uint16_t)w[DO_BY_SVAL];
	return true;
}

/* Does the layout fit the running interpreter? Its first interpreter's thread states point
 * back to it, and one is a thread of the process. An interpreter not started yet (a program
 * caught at its exec) cannot say: taken as is, the walk's failures are counted. Nor can one
 * whose thread state is not bound to its thread yet (native thread id 0: a spawned 3.13
 * caught between _PyThreadState_New and its binding lost its Python frames for the whole
 * run, 1 of about 10 test runs). */
static bool layout_fits(struct pyproc *p, uint64_t runtime, const struct mt_py_layout *L,
			char *note, size_t notelen)
{
	uint64_t interp, t, back, tid;
	if (read_u64(p, runtime + L->runtime_interp_head, &interp) < 0) {
		snprintf(note, notelen, "_PyRuntime could not be read");
		return false;
	}
	if (!interp) return true;
	if (read_u64(p, interp + L->interp_threads_head, &t) < 0) t = 0;
	if (!t) return true; /* no thread state yet: cannot say either */
	bool ours = false, unbound = false;
	int n = 0;
	for (; t && n < 256; n++) {
		if (read_u64(p, t + 16, &back) < 0 || back != interp ||  /* PyThreadState.interp */
		    read_u64(p, t + L->tstate_native_tid, &tid) < 0)
			break;
		if (tid == 0) {
			unbound = true;
		} else if (tid == (uint64_t)p->pid) {
			ours = true;
		} else if (!ours && tid > 0 && tid < (1u << 22)) { /* the main thread may be gone */
			char path[64];
			snprintf(path, sizeof path, "/proc/%d/task/%" PRIu64 "/stat", (int)p->pid, tid);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			ours = fd >= 0;
			if (fd >= 0) close(fd);
		}
		if (read_u64(p, t + L->tstate_next, &t) < 0) break;
	}
	if (!t && (ours || unbound)) return true;
	snprintf(note, notelen, "the offsets do not fit its thread states (a debug build, or one "
		 "configured otherwise than a release build)");
	return false;
}

/* ---- the interpreter's object ---- */

struct mapped {
	char path[4096];
	uint64_t zero;       /* where its offset 0 is mapped */
	uint64_t lo, hi;     /* all its mappings */
};

static bool python_name(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strncmp(b, "python", 6) == 0 || strncmp(b, "libpython", 9) == 0;
}

/* The objects of pid whose file name says Python, up to max. */
static int python_objects(pid_t pid, struct mapped *m, int max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f) return 0;
	int n = 0;
	char line[4200];
	while (fgets(line, sizeof line, f)) {
		uint64_t lo, hi, off;
		int name_at = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %n", &lo, &hi, &off,
			   &name_at) < 3 || !name_at || line[name_at] != '/')
			continue;
		char *name = line + name_at;
		name[strcspn(name, "\n")] = '\0';
		if (!python_name(name)) continue;
		int i = 0;
		while (i < n && strcmp(m[i].path, name) != 0) i++;
		if (i == n) {
			if (n == max) continue;
			memset(&m[n], 0, sizeof m[n]);
			snprintf(m[n].path, sizeof m[n].path, "%s", name);
			m[n].lo = lo;
			n++;
		}
		if (off == 0 && !m[i].zero) m[i].zero = lo;
		if (lo < m[i].lo) m[i].lo = lo;
		if (hi > m[i].hi) m[i].hi = hi;
	}
	fclose(f);
	return n;
}

struct syms {
	uint64_t runtime, version, eval, eval_size, code_type;
};

static bool read_syms(pid_t pid, const struct mapped *m, struct syms *s, uint64_t *bias)
{
	char path[4200];
	snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, m->path);
	struct elfobj o;
	char err[128];
	if (elfobj_open(&o, path, err, sizeof err) < 0) return false;
	uint64_t size;
	bool ok = elfobj_find_symbol(&o, "_PyRuntime", &s->runtime, &size) == 0;
	if (ok) {
		*bias = m->zero - elfobj_first_load(&o);
		if (elfobj_find_symbol(&o, "Py_Version", &s->version, &size) < 0) s->version = 0;
		if (elfobj_find_symbol(&o, "_PyEval_EvalFrameDefault", &s->eval, &s->eval_size) < 0)
			s->eval = s->eval_size = 0;
		if (elfobj_find_symbol(&o, "PyCode_Type", &s->code_type, &size) < 0) s->code_type = 0;
	}
	elfobj_close(&o);
	return ok;
}

/* The version from the file name, when Py_Version cannot say (before 3.11): "python3.10". */
static uint32_t version_of_name(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	const char *v = strstr(b, "python");
	unsigned maj, min;
	if (v && sscanf(v + 6, "%u.%u", &maj, &min) == 2 && maj < 256 && min < 256)
		return maj << 8 | min;
	return 0;
}

struct pyproc *pyproc_open(pid_t pid, int mem_fd, struct py_found *found)
{
	memset(found, 0, sizeof *found);
	struct pyproc *p = calloc(1, sizeof *p);
	struct mapped *m = calloc(8, sizeof *m);
	if (!p || !m) goto fail;
	p->pid = pid;
	p->mem_fd = mem_fd;
	int n = python_objects(pid, m, 8);
	struct syms s = {0};
	uint64_t bias = 0;
	int i = 0;
	while (i < n && !read_syms(pid, &m[i], &s, &bias)) i++;
	if (i == n) goto fail;
	found->found = true;
	snprintf(found->object, sizeof found->object, "%.255s", m[i].path);
	uint32_t v = 0;
	if (s.version && py_read(p, bias + s.version, &v, sizeof v) == 0) v >>= 16;
	else v = version_of_name(m[i].path);
	found->version = v;
	if (v < 0x030b) {
		snprintf(found->note, sizeof found->note, "CPython %u.%u: Python frames need 3.11 or "
			 "later", v >> 8, v & 0xff);
		goto fail;
	}
	if (!s.eval || !s.code_type) {
		snprintf(found->note, sizeof found->note, "no _PyEval_EvalFrameDefault or PyCode_Type "
			 "symbol in %.150s", m[i].path);
		goto fail;
	}
	struct mt_py_layout *L = &found->layout;
	uint64_t runtime = bias + s.runtime;
	if (v >= 0x030d) {
		if (!debug_offsets(p, runtime, L, &p->o, found->note, sizeof found->note)) goto fail;
		snprintf(found->source, sizeof found->source, "its _Py_DebugOffsets");
	} else {
		char why[128], path[4200];
		snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, m[i].path);
		if (py_layout_from_dwarf(path, v, L, &p->o, why, sizeof why)) {
			snprintf(found->source, sizeof found->source, "its DWARF");
		} else {
			py_builtin_layout(v, L, &p->o);
			snprintf(found->source, sizeof found->source, "the built-in table");
		}
	}
	L->version = v;
	L->runtime = runtime;
	L->code_filename = p->o.code_filename; /* for the names of new code objects */
	L->code_firstlineno = p->o.code_firstlineno;
	L->code_linetable = p->o.code_linetable;
	L->uni_state = p->o.uni_state;
	L->uni_length = p->o.uni_length;
	L->uni_ascii_size = p->o.uni_ascii_size;
	L->bytes_size = p->o.bytes_size;
	L->bytes_sval = p->o.bytes_sval;
	if (!layout_fits(p, runtime, L, found->note, sizeof found->note)) goto fail;
	found->usable = true;
	p->version = v;
	p->eval_start = bias + s.eval;
	p->eval_end = p->eval_start + (s.eval_size ? s.eval_size : 1);
	p->obj_start = m[i].lo;
	p->obj_end = m[i].hi;
	p->code_type = bias + s.code_type;
	L->code_type = p->code_type;
	L->ob_type = p->o.ob_type;
	p->nbuckets = 256;
	p->buckets = calloc(p->nbuckets, sizeof *p->buckets);
	if (!p->buckets) goto fail;
	free(m);
	return p;
fail:
	free(m);
	if (p) free(p->buckets);
	free(p);
	return NULL;
}

bool pyproc_in_eval(const struct pyproc *p, uint64_t pc)
{
	return p && pc >= p->eval_start && pc < p->eval_end;
}

bool pyproc_in_interpreter(const struct pyproc *p, uint64_t pc)
{
	return p && pc >= p->obj_start && pc < p->obj_end;
}
