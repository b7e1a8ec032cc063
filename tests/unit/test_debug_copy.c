/* The shared uncompressed copy of a compressed debug file (unwind/debug_copy.c): a copy of this
 * test's own executable with its DWARF compressed (objcopy --compress-debug-sections) is given
 * to libdw as the copy: no section is compressed any more, its build-id note is found through
 * the program headers as libdw finds it, libdw reads the same compilation units and the same
 * line for an address; a second open shares the copy; a file with nothing compressed is left
 * as it is. */
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "unwind/debug_copy.h"

static int compressed_sections(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int n = 0;
	for (Elf_Scn *scn = NULL; e && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED)) n++;
	}
	if (e) elf_end(e);
	return n;
}

static int count_cus(int fd, Dwarf_Addr pc, int *line)
{
	Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
	if (!dw) return -1;
	int n = 0;
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		n++;
		off = next;
	}
	Dwarf_Die cu;
	Dwarf_Line *l;
	*line = -1;
	if (dwarf_addrdie(dw, pc, &cu) && (l = dwarf_getsrc_die(&cu, pc))) dwarf_lineno(l, line);
	dwarf_end(dw);
	return n;
}

static int build_id(int fd, char *out, size_t outlen)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id;
	ssize_t n = e ? dwelf_elf_gnu_build_id(e, &id) : -1; /* through PT_NOTE when there is one */
	int k = 0;
	for (ssize_t i = 0; i < n && k + 3 < (int)outlen; i++)
		k += snprintf(out + k, outlen - (size_t)k, "%02x", ((const unsigned char *)id)[i]);
	if (e) elf_end(e);
	return (int)n;
}

int main(void)
{
	elf_version(EV_CURRENT);
	char exe[PATH_MAX], tmp[] = "/tmp/memtraced-debugcopy.XXXXXX", zpath[PATH_MAX + 64];
	char cmd[3 * PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0 || !mkdtemp(tmp)) {
		CHECK("debug_copy_setup", 0);
		return CHECK_DONE();
	}
	exe[n] = '\0';
	snprintf(zpath, sizeof zpath, "%s/z", tmp);
	snprintf(cmd, sizeof cmd, "objcopy --compress-debug-sections=zlib '%s' '%s'", exe, zpath);
	int zfd = system(cmd) == 0 ? open(zpath, O_RDONLY) : -1;
	CHECKF("debug_copy_compressed_input", zfd >= 0 && compressed_sections(zfd) > 0,
	       "objcopy gave no compressed sections (%s)", zpath);
	if (zfd < 0) return CHECK_DONE();
	/* count_cus's address in the file: less the load bias when the executable is PIE */
	extern char __executable_start;
	GElf_Ehdr eh;
	Elf *ze = elf_begin(zfd, ELF_C_READ_MMAP, NULL);
	bool pie = ze && gelf_getehdr(ze, &eh) && eh.e_type == ET_DYN;
	if (ze) elf_end(ze);
	Dwarf_Addr pc = (Dwarf_Addr)(uintptr_t)&count_cus - (pie ? (uintptr_t)&__executable_start : 0);
	int want_line = -1, got_line = -1;
	int want_cus = count_cus(zfd, pc, &want_line);
	char want_id[130] = "", got_id[130] = "";
	build_id(zfd, want_id, sizeof want_id);

	int copy = debug_copy_uncompressed(zfd); /* zfd is closed when a copy is given */
	struct stat a, b;
	CHECKF("debug_copy_made", copy >= 0 && compressed_sections(copy) == 0,
	       "fd %d, %d compressed sections left", copy, copy >= 0 ? compressed_sections(copy) : -1);
	int got_cus = count_cus(copy, pc, &got_line);
	CHECKF("debug_copy_same_units", want_cus > 0 && want_line > 0 && got_cus == want_cus &&
	       got_line == want_line,
	       "%d compilation units, line %d; the compressed file: %d, line %d", got_cus, got_line,
	       want_cus, want_line);
	CHECKF("debug_copy_build_id_by_segment", build_id(copy, got_id, sizeof got_id) > 0 &&
	       !strcmp(got_id, want_id), "'%s', want '%s'", got_id, want_id);

	int again = debug_copy_uncompressed(open(zpath, O_RDONLY));
	CHECKF("debug_copy_shared", again >= 0 && again != copy && fstat(copy, &a) == 0 &&
	       fstat(again, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev,
	       "a second open of the file gave another copy");

	int plain = open(exe, O_RDONLY);
	CHECKF("debug_copy_plain_left_alone", debug_copy_uncompressed(plain) == plain,
	       "a file with nothing compressed was copied");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd)) {}
	return CHECK_DONE();
}
