/* What the daemon needs to know of one object file of a target besides its allocators:
 * is it code we can call into, does it carry our sampler's USDT probes, where is a function.
 * Answered in the parser (the daemon never parses a target's file), sent back as is. */
#ifndef MEMTRACED_ELF_OBJFACTS_H
#define MEMTRACED_ELF_OBJFACTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/facts.h"

/* The facts of the file at path; symbol (may be NULL or "") is looked up as a program's call
 * binds it: a default-version function definition in .dynsym, else in .symtab. 0, or -1 with
 * a message when the file is no x86-64 ELF (then only elf_x86_64 = false is known). */
int elf_facts_of(const char *path, const char *symbol, struct elf_facts *f, char *err,
		 size_t errlen);

#endif
