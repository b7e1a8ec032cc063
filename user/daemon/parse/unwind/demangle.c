/* Demangling through libiberty (Debian's libiberty-dev, a static library of plain C):
 * cplus_demangle() in its default "auto" style knows the Itanium C++ ABI and both Rust
 * manglings, so the daemon needs neither libstdc++'s __cxa_demangle (a C++ runtime in a C
 * program) nor a hand-written demangler.
 *
 * What Debian 12's libiberty-dev 20230104 gives (tests/unit/test_stacks.c, demangle_*):
 *  - C++: templates, operators, conversion operators, lambdas ("main::{lambda(int)#1}::
 *    operator()(int) const"), constructors, function templates with their return type;
 *  - Rust legacy (_ZN...17h<hash>E): the path with $LT$/$u20$/.. escapes decoded, the hash
 *    left out (no DMGL_VERBOSE; c++filt prints it);
 *  - Rust v0 (_R...): paths, generics ("core::mem::swap::<i32>"), closures ("{closure#0}"),
 *    trait impls ("<mycrate::Foo as core::fmt::Display>::fmt");
 *  - a malformed name gives NULL: the caller keeps the raw name. */
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
