/* The layout of a CPython 3.11/3.12 from its own DWARF: a build with debug information (pyenv
 * builds keep it; Debian's python3.11-dbg installs it as a separate debug file, which libdw's
 * standard search finds by build-id). Each offset is the member's DW_AT_data_member_location
 * in the struct the interpreter was built with, so a build configured otherwise than a
 * release build (a debug build) gets its own offsets. The types are looked up among the
 * compilation units' top-level DIEs, the first complete definition of each name. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <string.h>

#include "pyproc_int.h"

enum {
	T_RUNTIME, T_INTERP, T_TSTATE, T_CFRAME, T_FRAME, T_CODE, T_ASCII, T_COMPACT, T_BYTES,
	T_OBJECT, T_VAROBJECT, T_COUNT
};

static const char *const type_names[T_COUNT] = {
	"pyruntimestate", "_is", "_ts", "_PyCFrame", "_PyInterpreterFrame", "PyCodeObject",
	"PyASCIIObject", "PyCompactUnicodeObject", "PyBytesObject", "_object", "PyVarObject",
};

struct types {
	Dwarf_Die die[T_COUNT];
	bool found[T_COUNT];
	int nfound;
};

/* A struct's DIE under a typedef, const or volatile. */
static bool peel(Dwarf_Die *die)
{
	for (int i = 0; i < 8; i++) {
		int tag = dwarf_tag(die);
		if (tag == DW_TAG_structure_type) return true;
		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type)
			return false;
		Dwarf_Attribute a;
		if (!dwarf_attr_integrate(die, DW_AT_type, &a) || !dwarf_formref_die(&a, die)) return false;
	}
	return false;
}

static void scan_cu(Dwarf_Die *cu, struct types *t)
{
	Dwarf_Die die;
	if (dwarf_child(cu, &die) != 0) return;
	do {
		int tag = dwarf_tag(&die);
		if (tag != DW_TAG_structure_type && tag != DW_TAG_typedef) continue;
		const char *name = dwarf_diename(&die);
		if (!name) continue;
		for (int i = 0; i < T_COUNT; i++) {
			if (t->found[i] || strcmp(name, type_names[i]) != 0) continue;
			Dwarf_Die s = die;
			if (!peel(&s) || !dwarf_hasattr(&s, DW_AT_byte_size)) continue; /* a declaration */
			t->die[i] = s;
			t->found[i] = true;
			t->nfound++;
		}
	} while (t->nfound < T_COUNT && dwarf_siblingof(&die, &die) == 0);
}

/* The offset of path ("threads.head") in the struct s: 0, or -1. */
static int member_offset(Dwarf_Die s, const char *path, uint64_t *off)
{
	char part[64];
	*off = 0;
	while (*path) {
		size_t n = strcspn(path, ".");
		if (n >= sizeof part) return -1;
		memcpy(part, path, n);
		part[n] = '\0';
		path += n + (path[n] == '.');
		Dwarf_Die m;
		bool hit = false;
		if (dwarf_child(&s, &m) != 0) return -1;
		do {
			const char *name = dwarf_diename(&m);
			if (dwarf_tag(&m) == DW_TAG_member && name && strcmp(name, part) == 0) {
				hit = true;
				break;
			}
		} while (dwarf_siblingof(&m, &m) == 0);
		Dwarf_Attribute a;
		Dwarf_Word loc;
		if (!hit || !dwarf_attr(&m, DW_AT_data_member_location, &a) || dwarf_formudata(&a, &loc) != 0)
			return -1;
		*off += loc;
		if (*path) {
			if (!dwarf_attr_integrate(&m, DW_AT_type, &a) || !dwarf_formref_die(&a, &s) || !peel(&s))
				return -1;
		}
	}
	return 0;
}

struct want {
	int type;
	const char *path;
	uint16_t *out;
};

static bool take(struct types *t, const struct want *w, size_t n, char *missing, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t off;
		if (!t->found[w[i].type] || member_offset(t->die[w[i].type], w[i].path, &off) < 0 ||
		    off >= MT_PY_NONE) {
			snprintf(missing, len, "%s.%s", type_names[w[i].type], w[i].path);
			return false;
		}
		*w[i].out = (uint16_t)off;
	}
	return true;
}

static uint16_t size_of(Dwarf_Die *d)
{
	Dwarf_Attribute a;
	Dwarf_Word v = 0;
	if (dwarf_attr(d, DW_AT_byte_size, &a)) dwarf_formudata(&a, &v);
	return v < MT_PY_NONE ? (uint16_t)v : 0;
}

static const Dwfl_Callbacks offline = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

bool py_layout_from_dwarf(const char *path, uint32_t version, struct mt_py_layout *L,
			  struct py_objlayout *o, char *note, size_t notelen)
{
	Dwfl *dwfl = dwfl_begin(&offline);
	if (!dwfl) return false;
	bool ok = false;
	Dwfl_Module *mod = dwfl_report_offline(dwfl, "python", path, -1);
	dwfl_report_end(dwfl, NULL, NULL);
	Dwarf_Addr bias;
	Dwarf *dw = mod ? dwfl_module_getdwarf(mod, &bias) : NULL;
	if (!dw) {
		snprintf(note, notelen, "no DWARF");
		goto out;
	}
	struct types t = {0};
	Dwarf_Off off = 0, next;
	size_t hsize;
	for (int cus = 0; t.nfound < T_COUNT && cus < 100000 &&
	     dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0; off = next, cus++) {
		Dwarf_Die cu;
		if (dwarf_offdie(dw, off + hsize, &cu)) scan_cu(&cu, &t);
	}
	bool v311 = version == 0x030b;
	const struct want w[] = {
		{T_RUNTIME, "interpreters.head", &L->runtime_interp_head},
		{T_INTERP, "next", &L->interp_next},
		{T_INTERP, "threads.head", &L->interp_threads_head},
		{T_TSTATE, "next", &L->tstate_next},
		{T_TSTATE, "native_thread_id", &L->tstate_native_tid},
		{T_TSTATE, "cframe", &L->tstate_frame},
		{T_CFRAME, "current_frame", &L->cframe_frame},
		{T_FRAME, "previous", &L->frame_previous},
		{T_FRAME, "f_code", &L->frame_code},
		{T_FRAME, "prev_instr", &L->frame_instr},
		{T_FRAME, "owner", &L->frame_owner},
		{T_CODE, "co_filename", &o->code_filename},
		{T_CODE, "co_qualname", &o->code_qualname},
		{T_CODE, "co_linetable", &o->code_linetable},
		{T_CODE, "co_firstlineno", &o->code_firstlineno},
		{T_CODE, "co_code_adaptive", &o->code_adaptive},
		{T_ASCII, "state", &o->uni_state},
		{T_ASCII, "length", &o->uni_length},
		{T_BYTES, "ob_sval", &o->bytes_sval},
		{T_VAROBJECT, "ob_size", &o->bytes_size},
		{T_OBJECT, "ob_type", &o->ob_type},
	};
	char missing[160] = "";
	if (!take(&t, w, sizeof w / sizeof w[0], missing, sizeof missing)) {
		snprintf(note, notelen, "its DWARF has no %s", missing);
		goto out;
	}
	const struct want w311[] = {{T_FRAME, "is_entry", &L->frame_is_entry}};
	const struct want w312[] = {{T_TSTATE, "_status", &L->tstate_status}};
	if (!take(&t, v311 ? w311 : w312, 1, missing, sizeof missing)) {
		snprintf(note, notelen, "its DWARF has no %s", missing);
		goto out;
	}
	if (v311) {
		L->tstate_status = MT_PY_NONE;
		L->owner_cstack = MT_PY_NONE;
	} else {
		L->frame_is_entry = MT_PY_NONE;
		L->owner_cstack = 3; /* FRAME_OWNED_BY_CSTACK (an enum value, not a member) */
	}
	L->code_ident = o->code_qualname;
	o->uni_ascii_size = size_of(&t.die[T_ASCII]);
	o->uni_compact_size = size_of(&t.die[T_COMPACT]);
	ok = o->uni_ascii_size && o->uni_compact_size;
	if (!ok) snprintf(note, notelen, "its DWARF has no size of PyASCIIObject");
out:
	dwfl_end(dwfl);
	return ok;
}
