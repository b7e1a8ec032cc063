/* The DWARF scopes around a pc: the physical chain from the innermost DIE whose pc range holds
 * it (inlined instance, lexical block or subprogram) out to the CU, whatever the producer. */
#ifndef MEMTRACED_SCOPES_H
#define MEMTRACED_SCOPES_H

#include <elfutils/libdw.h>

/* Like dwarf_getscopes_die(innermost DIE around pc): *scopes gets a malloc'd array, innermost
 * first, ending with the CU (namespaces and types on the way included); returns its length,
 * 0 when no DIE of cudie holds pc, -1 on error. pc is relative to the module (pc - bias). */
int pc_scopes(Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Die **scopes);

#endif
