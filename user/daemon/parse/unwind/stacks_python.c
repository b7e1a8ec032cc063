/* Stacks that mix Python and native frames (stacks.h: stacks_set_python).
 *
 * CPython 3.11+ runs several Python frames in one C activation of the eval loop
 * (_PyEval_EvalFrameDefault): going outwards, each activation of it in the native stack is
 * replaced by the Python frames it ran, the next ones of the sample's Python chain up to
 * the one flagged as its entry (MT_PY_F_ENTRY). Native frames inside (a C extension called
 * from Python) and outside stay; with --python=only the interpreter's own are left out.
 * Python frames the native unwind did not reach (it stopped early) go at its end.
 * stacks.c's loop asks here (stacks_int.h: stacks_py_*), and makes the codes. */
#include <string.h>

#include "python/pyproc.h"
#include "stacks_int.h"

void stacks_set_python(struct stacks *s, struct pyproc *py, enum py_mode mode)
{
	pyproc_close(s->py);
	s->py = py;
	s->py_mode = mode;
}

void stacks_find_python(struct stacks *s, enum py_mode mode, struct py_found *found)
{
	memset(found, 0, sizeof *found);
	if (mode == PY_MODE_NO || s->object_path) return;
	stacks_set_python(s, pyproc_open(s->pid, s->mem_fd, found), mode);
}

void stacks_python_sample(struct stacks *s, const struct mt_py_frame *frames, int n, int status,
			  const struct mt_py_code *codes, int ncodes)
{
	for (int i = 0; s->py && i < ncodes; i++)
		pyproc_learn(s->py, &codes[i]);
	/* placeholders (code 0) out; a placeholder's ENTRY flag (the eval loop's entry shim of
	 * 3.12+) is the frame's before it */
	int k = 0;
	for (int i = 0; i < n && i < MT_PY_MAX_FRAMES; i++) {
		if (frames[i].code) s->py_buf[k++] = frames[i];
		else if (k && (frames[i].flags & MT_PY_F_ENTRY)) s->py_buf[k - 1].flags |= MT_PY_F_ENTRY;
	}
	s->py_frames = s->py_buf;
	s->py_n = k;
	s->py_status = status;
	s->py_next = 0;
	if (!s->py || s->py_mode == PY_MODE_NO) {
		s->py_n = 0;
		return;
	}
	if (status == MT_PY_CUT) s->stats.py_cut++;
	else if (status == MT_PY_NO_THREAD) s->stats.py_no_thread++;
	else if (status == MT_PY_READ_FAILED) s->stats.py_failed++;
	if (s->py_n) s->stats.py_samples++;
}

bool stacks_py_left(const struct stacks *s) { return s->py_next < s->py_n; }

bool stacks_py_splices(const struct stacks *s, uint64_t pc)
{
	return stacks_py_left(s) && pyproc_in_eval(s->py, pc);
}

bool stacks_py_in_interpreter(const struct stacks *s, uint64_t pc)
{
	return s->py && s->py_mode != PY_MODE_NO && pyproc_in_interpreter(s->py, pc);
}

bool stacks_py_hides(const struct stacks *s, uint64_t pc)
{
	return s->py && s->py_mode == PY_MODE_ONLY && pyproc_in_interpreter(s->py, pc);
}

int stacks_py_take(struct stacks *s, struct py_location *loc, bool *last)
{
	const struct mt_py_frame *f = &s->py_frames[s->py_next++];
	*last = f->flags & MT_PY_F_ENTRY;
	s->stats.py_frames++;
	int rc = pyproc_locate(s->py, f, loc);
	if (rc == 0) return 0;
	if (rc == PY_OVER_BUDGET) {
		s->stats.py_over_budget++;
		return PY_OVER_BUDGET;
	}
	s->stats.py_gone++;
	return -1;
}

void stacks_py_done(struct stacks *s)
{
	s->py_frames = NULL;
	s->py_n = s->py_next = 0;
}
