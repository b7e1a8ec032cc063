/* The memory budget of Python names in the parser (python/pyproc.h, issue 35): a process
 * that hands out ever more code objects (a forged runtime: up to 256 KiB of line table each)
 * keeps at most the budget's bytes; a frame of a code object past it is PY_OVER_BUDGET, not
 * read; one kept before is still named; the bytes go back when the process is closed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "python/pyproc.h"

static void code_at(struct mt_py_code *k, uint64_t addr)
{
	memset(k, 0, sizeof *k);
	k->code = addr;
	k->ident = addr + 1;
	k->firstlineno = 10;
	snprintf(k->qualname, sizeof k->qualname, "forged_%llx", (unsigned long long)addr);
	k->qualname_len = (uint16_t)strlen(k->qualname);
	snprintf(k->filename, sizeof k->filename, "/forged/%llx.py", (unsigned long long)addr);
	k->filename_len = (uint16_t)strlen(k->filename);
	k->table_len = MT_PY_TABLE_BYTES; /* as much as a sample carries */
	k->table_size = MT_PY_TABLE_BYTES;
	memset(k->table, 0x80, MT_PY_TABLE_BYTES);
}

static int locate(struct pyproc *p, uint64_t addr)
{
	struct mt_py_frame f = {.code = addr, .ident = addr + 1, .instr = UINT32_MAX};
	struct py_location loc;
	return pyproc_locate(p, &f, &loc);
}

int main(void)
{
	const size_t budget = 1 << 20;
	pyproc_set_budget(budget);
	struct pyproc *p = pyproc_for_test();
	CHECK("pybudget_opened", p != NULL);
	if (!p) return CHECK_DONE();
	struct mt_py_code *k = malloc(sizeof *k);
	int n = 100000;
	for (int i = 0; i < n; i++) {
		code_at(k, 0x100000 + 0x1000 * (uint64_t)i);
		pyproc_learn(p, k);
	}
	size_t kept = pyproc_bytes(p);
	CHECKF("pybudget_bytes_within_budget", kept <= budget && kept > budget / 2,
	       "%zu bytes kept of a %zu budget", kept, budget);
	CHECKF("pybudget_overflow_counted", pyproc_over_budget(p) > 0, "%llu",
	       (unsigned long long)pyproc_over_budget(p));
	CHECK("pybudget_early_code_named", locate(p, 0x100000) == 0);
	CHECK("pybudget_late_code_over_budget", locate(p, 0x100000 + 0x1000 * (uint64_t)(n - 1)) == PY_OVER_BUDGET);
	pyproc_close(p);
	/* the budget is given back: a new process keeps names again */
	struct pyproc *r = pyproc_for_test();
	code_at(k, 0x5000);
	pyproc_learn(r, k);
	CHECK("pybudget_given_back", r && locate(r, 0x5000) == 0);
	pyproc_close(r);
	free(k);
	return CHECK_DONE();
}
