/* A Python instruction's line from its code object's location table (python/pyproc.h:
 * py_addr_to_line) against CPython's own co_lines(), for every function of a few stdlib
 * modules (json, http.server, asyncio: loops, comprehensions, try blocks, long and short
 * entries) under each interpreter of the machine: Debian's python3.11 and pyenv's 3.11,
 * 3.12, 3.13. The interpreter prints each code object's table in hex, its first line and
 * co_lines()'s ranges; every instruction of every range must get its line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "python/pyproc.h"

static const char *const dumper =
	"import types, json.decoder, http.server, asyncio.base_events\n"
	"def codes(c):\n"
	"    yield c\n"
	"    for k in c.co_consts:\n"
	"        if isinstance(k, types.CodeType): yield from codes(k)\n"
	"for m in (json.decoder, http.server, asyncio.base_events):\n"
	"    src = open(m.__file__).read()\n"
	"    for c in codes(compile(src, m.__file__, 'exec')):\n"
	"        print('code', c.co_firstlineno, c.co_linetable.hex() or '-')\n"
	"        for s, e, l in c.co_lines():\n"
	"            if l is not None: print('range', s, e, l)\n";

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void run(const char *py, const char *tag)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s -c \"$PYLINES\" 2>&1", py);
	setenv("PYLINES", dumper, 1);
	FILE *f = popen(cmd, "r");
	if (!f) {
		printf("FAIL %s_ran: popen\n", tag);
		return;
	}
	static char line[1 << 20];
	static uint8_t table[1 << 19];
	size_t len = 0;
	int first = 0;
	long codes = 0, instrs = 0, wrong = 0;
	char example[200] = "";
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "code ", 5) == 0) {
			char *hex = strchr(line + 5, ' ');
			first = atoi(line + 5);
			len = 0;
			for (char *h = hex ? hex + 1 : line; hex && hexval(h[0]) >= 0 && hexval(h[1]) >= 0 &&
			     len < sizeof table; h += 2)
				table[len++] = (uint8_t)(hexval(h[0]) << 4 | hexval(h[1]));
			codes++;
		} else if (strncmp(line, "range ", 6) == 0) {
			int s, e, l;
			if (sscanf(line + 6, "%d %d %d", &s, &e, &l) != 3) continue;
			for (int a = s; a < e; a += 2) {
				instrs++;
				int got = py_addr_to_line(table, len, first, a);
				if (got != l && !wrong++)
					snprintf(example, sizeof example, "offset %d: %d, not %d (first line %d)",
						 a, got, l, first);
			}
		}
	}
	int rc = pclose(f);
	char name[64];
	snprintf(name, sizeof name, "%s_lines_as_co_lines", tag);
	CHECKF(name, rc == 0 && codes > 100 && instrs > 10000 && wrong == 0,
	       "exit %d, %ld code objects, %ld instructions, %ld wrong: %s", rc, codes, instrs, wrong,
	       example);
}

int main(void)
{
	run("/usr/bin/python3.11", "debian311");
	const char *home = getenv("HOME");
	char pat[512];
	snprintf(pat, sizeof pat, "ls -d %s/.pyenv/versions/3.1[123].*/bin/python3.1[123] 2>/dev/null",
		 getenv("PYENV_ROOT") ? getenv("PYENV_ROOT") : home ? home : "/root");
	if (getenv("PYENV_ROOT"))
		snprintf(pat, sizeof pat, "ls -d %s/versions/3.1[123].*/bin/python3.1[123] 2>/dev/null",
			 getenv("PYENV_ROOT"));
	FILE *l = popen(pat, "r");
	char py[512];
	while (l && fgets(py, sizeof py, l)) {
		py[strcspn(py, "\n")] = '\0';
		const char *v = strstr(py, "versions/");
		char tag[32];
		int maj = 0, min = 0, pat_ = 0;
		if (!v || sscanf(v + 9, "%d.%d.%d", &maj, &min, &pat_) < 2) continue;
		snprintf(tag, sizeof tag, "pyenv%d%d", maj, min);
		run(py, tag);
	}
	if (l) pclose(l);
	return CHECK_DONE();
}
