/* SDT notes (see usdt_notes.h). The note's descriptor is three 64-bit addresses (the probe,
 * the .stapsdt.base section, the semaphore) then "provider\0name\0arguments\0"; the file is
 * the target's: every length is checked against the section. */
#include "usdt_notes.h"

#include <string.h>

#define NT_STAPSDT 3

static bool note_names(const char *desc, size_t len, const char *provider, const char *name)
{
	if (len < 3 * 8) return false;
	const char *p = desc + 3 * 8, *end = desc + len;
	const char *pe = memchr(p, '\0', (size_t)(end - p));
	if (!pe) return false;
	const char *n = pe + 1;
	const char *ne = n < end ? memchr(n, '\0', (size_t)(end - n)) : NULL;
	return ne && strcmp(p, provider) == 0 && strcmp(n, name) == 0;
}

bool elfobj_has_usdt(const struct elfobj *o, const char *provider, const char *name)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(o->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf) continue;
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;
		while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_STAPSDT || nh.n_namesz != sizeof "stapsdt" ||
			    memcmp((const char *)data->d_buf + name_off, "stapsdt", sizeof "stapsdt"))
				continue;
			if (note_names((const char *)data->d_buf + desc_off, nh.n_descsz, provider, name))
				return true;
		}
	}
	return false;
}
