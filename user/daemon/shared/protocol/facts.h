/* An object's facts (parse/elf/objfacts.h), as the parser sends them to the daemon. */
#ifndef MEMTRACED_PROTOCOL_FACTS_H
#define MEMTRACED_PROTOCOL_FACTS_H
#include <stdbool.h>
#include <stdint.h>

struct elf_facts {
	bool elf_x86_64;        /* a 64-bit x86-64 ELF file */
	bool has_interp;        /* PT_INTERP: dynamically linked */
	bool has_otel_usdt;     /* carries the USDT probe otel_memory:alloc (a sampler) */
	bool sym_found;         /* the symbol asked for */
	uint64_t sym_value;     /* its st_value (add the load bias for its address) */
	uint64_t sym_offset;    /* its file offset (where a uprobe goes) */
};

#endif
