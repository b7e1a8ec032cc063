/* The daemon's checks of the parser's replies (shared/protocol/protocol.h), from their bytes
 * alone: what a parser taken over by a hostile file sends cannot make the daemon read past a
 * message (fuzzed: tests/fuzz/fuzz_protocol.c). */
#ifndef MEMTRACED_PROTOCOL_CHECK_H
#define MEMTRACED_PROTOCOL_CHECK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

/* PR_LOCS well-formed? Then *strings: the bytes its strings take, NULs included. */
bool pr_locs_check(const uint8_t *p, size_t len, size_t *strings);
/* Copies a checked PR_LOCS's locations into locs[nlocs] and their strings into s. */
void pr_locs_copy(const uint8_t *p, mt_location *locs, char *s);
/* PR_UNWIND well-formed, with at most max_codes codes? */
bool pr_unwind_check(const uint8_t *p, size_t len, int max_codes);

/* Does file offset off lie inside an executable PT_LOAD segment of the ELF file fd (where a
 * probe site the parser named may go)? Reads the ELF header and at most ELF_CODE_MAX_PHDRS
 * program headers: the daemon's one parse of a target's file, of fixed-size structs. */
#define ELF_CODE_MAX_PHDRS 128
bool elf_offset_is_code(int fd, uint64_t off);
/* The same from the header followed by the program headers at e_phoff within p[len], for a
 * file of file_size bytes (fuzzed). */
bool elf_offset_is_code_bytes(const uint8_t *p, size_t len, uint64_t file_size, uint64_t off);

#endif
