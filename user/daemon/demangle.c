/* Demangling through libiberty (Debian's libiberty-dev, a static library of plain C):
 * cplus_demangle() in its default "auto" style knows the Itanium C++ ABI and both Rust
 * manglings, so the daemon needs neither libstdc++'s __cxa_demangle (a C++ runtime in a C
 * program) nor a hand-written demangler. */
#include "demangle.h"

#include <libiberty/demangle.h>
#include <stddef.h>

char *demangle_symbol(const char *name)
{
	if (!name)
		return NULL;
	/* Only names that look mangled: C++ "_Z...", Rust v0 "_R...". Legacy Rust names are
	 * Itanium-like "_ZN...E" names. Everything else is a C name, left as it is. */
	if (name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}
