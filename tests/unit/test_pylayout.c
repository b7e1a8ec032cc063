/* The layout of CPython 3.11 and 3.12 from an interpreter's DWARF (python/pydwarf.c) against
 * the built-in table for release builds (python/pyfind.c), for every pyenv libpython 3.11 and
 * 3.12 of the machine (pyenv builds keep their DWARF): every offset the BPF walk and the
 * names use must agree, which checks the table against the structs those releases were built
 * with. A file without DWARF says so. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "python/pyproc_int.h"

static void compare(const char *lib, uint32_t version, const char *tag)
{
	struct mt_py_layout d = {0}, b = {0};
	struct py_objlayout od = {0}, ob = {0};
	char note[160] = "", name[96];
	bool ok = py_layout_from_dwarf(lib, version, &d, &od, note, sizeof note);
	snprintf(name, sizeof name, "%s_layout_from_dwarf", tag);
	CHECKF(name, ok, "%s: %s", lib, note);
	if (!ok) return;
	py_builtin_layout(version, &b, &ob);
	d.version = b.version = 0;
	d.runtime = b.runtime = 0;
	snprintf(name, sizeof name, "%s_dwarf_is_the_builtin_table", tag);
	int diff = -1;
	for (size_t i = 0; i < sizeof d / 2 && diff < 0; i++)
		if (((uint16_t *)&d)[i] != ((uint16_t *)&b)[i]) diff = (int)i;
	CHECKF(name, diff < 0 && memcmp(&od, &ob, sizeof od) == 0,
	       "first differing 16-bit word of the BPF layout: %d (%u against %u); names: %s", diff,
	       diff >= 0 ? ((uint16_t *)&d)[diff] : 0, diff >= 0 ? ((uint16_t *)&b)[diff] : 0,
	       memcmp(&od, &ob, sizeof od) ? "differ" : "same");
}

int main(void)
{
	const char *root = getenv("PYENV_ROOT");
	char pat[512];
	int n = 0;
	static const struct { const char *minor; uint32_t version; } v[] = {
		{"3.11", 0x030b}, {"3.12", 0x030c}};
	for (size_t i = 0; i < 2; i++) {
		if (root) snprintf(pat, sizeof pat, "%s/versions/%s.*/lib/libpython%s.so.1.0", root, v[i].minor, v[i].minor);
		else snprintf(pat, sizeof pat, "%s/.pyenv/versions/%s.*/lib/libpython%s.so.1.0",
			      getenv("HOME") ? getenv("HOME") : "/root", v[i].minor, v[i].minor);
		glob_t g;
		if (glob(pat, 0, NULL, &g) != 0) continue;
		for (size_t k = 0; k < g.gl_pathc; k++, n++) {
			char tag[32];
			snprintf(tag, sizeof tag, "pyenv%u%u", v[i].version >> 8, v[i].version & 0xff);
			compare(g.gl_pathv[k], v[i].version, tag);
		}
		globfree(&g);
	}
	struct mt_py_layout d;
	struct py_objlayout od;
	char note[160] = "";
	bool ok = py_layout_from_dwarf("/usr/bin/python3.11", 0x030b, &d, &od, note, sizeof note);
	printf("# Debian's python3.11: %s\n", ok ? "DWARF found (python3.11-dbg)" : note);
	if (ok) compare("/usr/bin/python3.11", 0x030b, "debian311");
	if (!n) printf("SKIP pylayout_pyenv: no pyenv libpython 3.11 or 3.12 on this machine\n");
	return CHECK_DONE();
}
