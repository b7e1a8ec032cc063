/* libFuzzer target of the daemon's checks of the parser's replies (parser/protocol_check.c):
 * the parser runs with nothing, but one taken over by a target's crafted file may send any
 * bytes. The input's first byte chooses the reply: even, PR_LOCS (checked, then copied into
 * buffers of the size the check gave: ASan sees any byte read or written past them); odd,
 * PR_UNWIND (checked; its codes and file names then read as the daemon reads them). A first
 * byte that is a multiple of 3 also checks the rest as an ELF file's header and program
 * headers (elf_offset_is_code_bytes: where a probe site may go). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/protocol_check.h"
#include "protocol/protocol.h"

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_protocol: invariant broken: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) return 0;
	size_t len = size - 1;
	/* a copy of exactly len bytes: a read past the message is an overflow */
	uint8_t *msg = malloc(len ? len : 1);
	if (!msg) return 0;
	memcpy(msg, data + 1, len);
	if (data[0] % 3 == 0 && len >= 8) {
		uint64_t off, file_size = len;
		memcpy(&off, msg, 8);
		off %= len + 64;
		if (elf_offset_is_code_bytes(msg, len, file_size, off) && off >= file_size)
			broken("an offset past the file taken for code");
	}
	if (data[0] % 2 == 0) {
		size_t strings;
		if (pr_locs_check(msg, len, &strings)) {
			struct pr_locs head;
			memcpy(&head, msg, sizeof head);
			if (head.nlocs > PARSER_MAX_LOCS || strings > (size_t)head.nlocs * (2 * PARSER_MAX_LOC_STRING + 2))
				broken("a checked PR_LOCS over its bounds");
			mt_location *locs = malloc((head.nlocs ? head.nlocs : 1) * sizeof *locs);
			char *s = malloc(strings ? strings : 1);
			if (locs && s) {
				pr_locs_copy(msg, locs, s);
				for (uint32_t i = 0; i < head.nlocs; i++)
					if (strlen(locs[i].filename) > PARSER_MAX_LOC_STRING ||
					    strlen(locs[i].defname) > PARSER_MAX_LOC_STRING)
						broken("a string longer than its cap");
			}
			free(locs);
			free(s);
		}
	} else {
		int max_codes = 1 + data[0] % 64;
		if (pr_unwind_check(msg, len, max_codes)) {
			struct pr_unwind u;
			memcpy(&u, msg, sizeof u);
			uint64_t sum = 0;
			for (int i = 0; i < u.n; i++) {
				uint64_t c;
				memcpy(&c, msg + sizeof u + (size_t)i * 8, 8);
				sum += c;
			}
			char file[PARSER_FILE_LEN];
			const uint8_t *f = msg + sizeof u + (size_t)u.n * 8;
			for (int i = 0; i < 2; i++) {
				memcpy(file, f, u.file_len[i]);
				file[u.file_len[i]] = '\0';
				f += u.file_len[i];
			}
			if (f != msg + len) broken("a checked PR_UNWIND of another length");
			(void)sum;
		}
	}
	free(msg);
	return 0;
}
