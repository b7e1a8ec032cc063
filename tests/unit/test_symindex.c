/* The symbol index (unwind/symindex.c) against libdw's own lookup: for objects of this machine
 * with only .dynsym (libstdc++, libc, libLLVM when installed) and with .symtab (memtraced), the
 * name symindex_find gives every 256th byte of .text is the one dwfl_module_addrname gives; the
 * time of a lookup of each is printed. */
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "unwind/symindex.h"

static const Dwfl_Callbacks offline = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void compare(const char *tag, const char *path, bool timed)
{
	char name[128];
	if (access(path, R_OK) != 0) {
		snprintf(name, sizeof name, "symindex_%s_present", tag);
		CHECKF(name, 0, "%s missing", path);
		return;
	}
	Dwfl *dwfl = dwfl_begin(&offline);
	dwfl_report_begin(dwfl);
	Dwfl_Module *mod = dwfl_report_elf(dwfl, tag, path, -1, 0x10000000, false);
	dwfl_report_end(dwfl, NULL, NULL);
	struct symindex x = {0};
	if (mod)
		symindex_build(&x, mod);
	snprintf(name, sizeof name, "symindex_%s_built", tag);
	CHECKF(name, mod && !x.failed && x.n > 100, "%s: %zu symbols", path, x.n);
	if (!mod || x.failed) {
		dwfl_end(dwfl);
		return;
	}
	/* the addresses of .text */
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	uint64_t lo = 0, hi = 0;
	size_t shstrndx;
	elf_getshdrstrndx(elf, &shstrndx);
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *sn;
		if (gelf_getshdr(scn, &sh) && (sn = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    strcmp(sn, ".text") == 0) {
			lo = sh.sh_addr + bias;
			hi = lo + sh.sh_size;
		}
	}
	size_t tried = 0, differ = 0;
	char first[512] = "";
	double t_index = 0, t_libdw = 0;
	size_t step = timed ? 32768 : 256; /* libdw's lookup is slow: not every byte */
	for (uint64_t pc = lo; pc < hi; pc += step) {
		double t0 = now_s();
		const char *a = symindex_find(&x, pc);
		double t1 = now_s();
		const char *b = dwfl_module_addrname(mod, pc);
		double t2 = now_s();
		t_index += t1 - t0;
		t_libdw += t2 - t1;
		tried++;
		if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0)) {
			if (!differ++)
				snprintf(first, sizeof first, "%#llx: index %s, libdw %s",
					 (unsigned long long)(pc - bias), a ? a : "-", b ? b : "-");
		}
	}
	snprintf(name, sizeof name, "symindex_%s_same_names_as_libdw", tag);
	CHECKF(name, tried > 100 && differ == 0, "%zu of %zu differ; first %s", differ, tried, first);
	printf("# %s: %zu symbols, %zu lookups: index %.3f us, libdw %.3f us each\n", tag, x.n,
	       tried, t_index / tried * 1e6, t_libdw / tried * 1e6);
	symindex_free(&x);
	dwfl_end(dwfl);
}

int main(void)
{
	elf_version(EV_CURRENT);
	compare("libstdcxx", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", false);
	compare("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6", false);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) /* build/tests/unit/X -> build/bin/memtraced: a big .symtab */
			snprintf(slash, sizeof exe - (size_t)(slash - exe), "/../../bin/memtraced");
		compare("memtraced_symtab", exe, false);
	}
	if (access("/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", R_OK) == 0)
		compare("libllvm", "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", true);
	return CHECK_DONE();
}
