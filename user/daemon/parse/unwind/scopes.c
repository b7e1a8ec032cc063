/* pc -> physical scope chain. libdw first: dwarf_getscopes finds the innermost DIE and
 * dwarf_getscopes_die the chain around it. That finds nothing for rustc's DWARF, and there a
 * short descent of our own takes over.
 *
 * Why: dwarf_getscopes walks the CU's children and prunes every DIE that has no pc range of its
 * own, DW_TAG_namespace included (elfutils 0.188, and later releases alike). C and C++ compilers
 * put defining subprograms at the CU's top level (C++: with DW_AT_specification into the
 * namespace), so they are found; rustc nests every subprogram in the namespaces of its path
 * (core::ops::function::FnOnce::call_once), where dwarf_getscopes never looks, and the inline
 * chain was lost: the innermost line came out under the symbol's name. dwarf_getscopes is only
 * defined from a CU (from a subprogram as root it misses an inlined instance that is a direct
 * child: depth 0 is its "not inlined" mark), and dwarf_getfuncs would find the subprogram but
 * walks every inlined instance of every function before it; the descent below steps through
 * namespaces and types and into a DIE with code only when its range holds pc, which is all
 * dwarf_getscopes would do if it did not stop at namespaces.
 *
 * Abstract origins (names, the inlined function's own DIE) may sit in another CU
 * (DW_FORM_ref_addr after LTO, partial units after dwz): the callers follow them with
 * dwarf_attr_integrate / dwarf_formref_die, which handle both; the physical chain itself is
 * always in one CU. */
#include "scopes.h"

#include <dwarf.h>
#include <stdlib.h>

/* DIEs without a pc range that may own DIEs with one. */
static int is_code_container(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_structure_type ||
	       tag == DW_TAG_class_type || tag == DW_TAG_union_type;
}

/* DIEs with a pc range (DW_AT_low_pc/high_pc or DW_AT_ranges) that may hold nested scopes. */
static int is_code_scope(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_lexical_block || tag == DW_TAG_entry_point ||
	       tag == DW_TAG_try_block || tag == DW_TAG_catch_block || tag == DW_TAG_with_stmt;
}

struct chain {
	Dwarf_Die *dies; /* outermost first while descending */
	int n, cap;
	int oom;
};

static int chain_push(struct chain *c, const Dwarf_Die *die)
{
	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 32;
		Dwarf_Die *d = realloc(c->dies, cap * sizeof(*d));
		if (!d) {
			c->oom = 1;
			return -1;
		}
		c->dies = d;
		c->cap = cap;
	}
	c->dies[c->n++] = *die;
	return 0;
}

/* Appends to c the path below parent down to the innermost DIE whose range holds pc; 1 when a
 * DIE with a range holds it (c then ends with it), 0 when none below parent does. */
static int descend(Dwarf_Die *parent, Dwarf_Addr pc, struct chain *c)
{
	Dwarf_Die child;
	if (dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);
		if (is_code_container(tag)) {
			if (!dwarf_haschildren(&child))
				continue;
			if (chain_push(c, &child) < 0)
				return 0;
			if (descend(&child, pc, c))
				return 1;
			c->n--;
		} else if (is_code_scope(tag) && dwarf_haspc(&child, pc) > 0) {
			if (chain_push(c, &child) < 0)
				return 0;
			descend(&child, pc, c);
			return 1;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

static int chain_innermost_first(struct chain *c, Dwarf_Die **scopes)
{
	for (int i = 0, j = c->n - 1; i < j; i++, j--) {
		Dwarf_Die t = c->dies[i];
		c->dies[i] = c->dies[j];
		c->dies[j] = t;
	}
	*scopes = c->dies;
	return c->n;
}

int pc_scopes(Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Die **scopes)
{
	*scopes = NULL;
	Dwarf_Die *found = NULL;
	int n = dwarf_getscopes(cudie, pc, &found);
	if (n > 0) {
		Dwarf_Die innermost = found[0];
		free(found);
		return dwarf_getscopes_die(&innermost, scopes);
	}
	free(found);

	struct chain c = {0};
	if (chain_push(&c, cudie) < 0)
		return -1;
	if (!descend(cudie, pc, &c)) {
		free(c.dies);
		return c.oom ? -1 : 0;
	}
	return chain_innermost_first(&c, scopes);
}
