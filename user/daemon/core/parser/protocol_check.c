/* The daemon's checks of what the parser sends (protocol.h): a parser that was taken over by a
 * target's crafted file may send anything; these decide, from the bytes alone, whether a reply
 * is well-formed before anything is copied out of it. Fuzzed by tests/fuzz/fuzz_protocol.c. */
#include "protocol_check.h"
#include "protocol/protocol.h"

#include <elf.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t loc_step(const struct pr_loc *l)
{
	return (sizeof *l + l->filename_len + l->defname_len + 3) & ~(size_t)3;
}

bool pr_locs_check(const uint8_t *p, size_t len, size_t *strings)
{
	if (len < sizeof(struct pr_locs)) return false;
	struct pr_locs head;
	memcpy(&head, p, sizeof head);
	if (head.nlocs > PARSER_MAX_LOCS || !head.code) return false;
	size_t off = offsetof(struct pr_locs, data), need = 0;
	for (uint32_t i = 0; i < head.nlocs; i++) {
		struct pr_loc l;
		if (len < off || len - off < sizeof l) return false;
		memcpy(&l, p + off, sizeof l);
		if (l.filename_len > PARSER_MAX_LOC_STRING || l.defname_len > PARSER_MAX_LOC_STRING)
			return false;
		if (len - off < loc_step(&l)) return false;
		need += l.filename_len + l.defname_len + 2;
		off += loc_step(&l);
	}
	*strings = need;
	return true;
}

void pr_locs_copy(const uint8_t *p, mt_location *locs, char *s)
{
	struct pr_locs head;
	memcpy(&head, p, sizeof head);
	size_t off = offsetof(struct pr_locs, data);
	for (uint32_t i = 0; i < head.nlocs; i++) {
		struct pr_loc l;
		memcpy(&l, p + off, sizeof l);
		const char *src = (const char *)p + off + sizeof l;
		locs[i] = (mt_location){.line = l.line, .start_char = l.start_char,
					.end_char = l.end_char, .filename = s};
		memcpy(s, src, l.filename_len);
		s[l.filename_len] = '\0';
		s += l.filename_len + 1;
		locs[i].defname = s;
		memcpy(s, src + l.filename_len, l.defname_len);
		s[l.defname_len] = '\0';
		s += l.defname_len + 1;
		off += loc_step(&l);
	}
}

bool pr_unwind_check(const uint8_t *p, size_t len, int max_codes)
{
	struct pr_unwind u;
	if (len < sizeof u) return false;
	memcpy(&u, p, sizeof u);
	return u.n >= 0 && u.n <= max_codes && u.file_len[0] < PARSER_FILE_LEN &&
	       u.file_len[1] < PARSER_FILE_LEN &&
	       len == sizeof u + (size_t)u.n * 8 + u.file_len[0] + u.file_len[1];
}

bool elf_offset_is_code_bytes(const uint8_t *p, size_t len, uint64_t file_size, uint64_t off)
{
	Elf64_Ehdr eh;
	if (len < sizeof eh) return false;
	memcpy(&eh, p, sizeof eh);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > ELF_CODE_MAX_PHDRS ||
	    eh.e_phoff > len || (len - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum)
		return false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
		if (ph.p_offset > file_size || ph.p_filesz > file_size - ph.p_offset) continue;
		if (off >= ph.p_offset && off - ph.p_offset < ph.p_filesz) return true;
	}
	return false;
}

bool elf_offset_is_code(int fd, uint64_t off)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
	/* the header, then the program headers where it says they are (a bounded table) */
	uint8_t buf[sizeof(Elf64_Ehdr) + ELF_CODE_MAX_PHDRS * sizeof(Elf64_Phdr)];
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh) return false;
	size_t phbytes = (size_t)(eh.e_phnum <= ELF_CODE_MAX_PHDRS ? eh.e_phnum : 0) * sizeof(Elf64_Phdr);
	if (!phbytes || eh.e_phoff > (uint64_t)st.st_size) return false;
	memcpy(buf, &eh, sizeof eh);
	/* laid out as the bytes version wants them: the table right after the header */
	((Elf64_Ehdr *)buf)->e_phoff = sizeof eh;
	if (pread(fd, buf + sizeof eh, phbytes, (off_t)eh.e_phoff) != (ssize_t)phbytes) return false;
	return elf_offset_is_code_bytes(buf, sizeof eh + phbytes, (uint64_t)st.st_size, off);
}
