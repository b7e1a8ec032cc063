/* Demangling of C++ and Rust symbol names. */
#ifndef MEMTRACED_DEMANGLE_H
#define MEMTRACED_DEMANGLE_H

/* The readable form of a mangled C++ (Itanium ABI) or Rust (legacy or v0) name, malloc'd;
 * NULL when name is not mangled (plain C names) or cannot be demangled. */
char *demangle_symbol(const char *name);

#endif
