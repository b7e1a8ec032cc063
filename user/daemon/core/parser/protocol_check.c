/* The daemon's checks of what the parser sends (protocol.h): a parser that was taken over by a
 * target's crafted file may send anything; these decide, from the bytes alone, whether a reply
 * is well-formed before anything is copied out of it. Fuzzed by tests/fuzz/fuzz_protocol.c. */
#include "protocol_check.h"
#include "protocol/protocol.h"

#include <stddef.h>
#include <string.h>

static size_t loc_step(const struct pr_loc *l)
{
	return (sizeof *l + l->filename_len + l->defname_len + 3) & ~(size_t)3;
}

bool pr_locs_check(const uint8_t *p, size_t len, size_t *strings)
{
	if (len < sizeof(struct pr_locs)) return false;
	struct pr_locs head;
	memcpy(&head, p, sizeof head);
	if (head.nlocs > PARSER_MAX_LOCS || !head.code) return false;
	size_t off = offsetof(struct pr_locs, data), need = 0;
	for (uint32_t i = 0; i < head.nlocs; i++) {
		struct pr_loc l;
		if (len < off || len - off < sizeof l) return false;
		memcpy(&l, p + off, sizeof l);
		if (l.filename_len > PARSER_MAX_LOC_STRING || l.defname_len > PARSER_MAX_LOC_STRING)
			return false;
		if (len - off < loc_step(&l)) return false;
		need += l.filename_len + l.defname_len + 2;
		off += loc_step(&l);
	}
	*strings = need;
	return true;
}

void pr_locs_copy(const uint8_t *p, mt_location *locs, char *s)
{
	struct pr_locs head;
	memcpy(&head, p, sizeof head);
	size_t off = offsetof(struct pr_locs, data);
	for (uint32_t i = 0; i < head.nlocs; i++) {
		struct pr_loc l;
		memcpy(&l, p + off, sizeof l);
		const char *src = (const char *)p + off + sizeof l;
		locs[i] = (mt_location){.line = l.line, .start_char = l.start_char,
					.end_char = l.end_char, .filename = s};
		memcpy(s, src, l.filename_len);
		s[l.filename_len] = '\0';
		s += l.filename_len + 1;
		locs[i].defname = s;
		memcpy(s, src + l.filename_len, l.defname_len);
		s[l.defname_len] = '\0';
		s += l.defname_len + 1;
		off += loc_step(&l);
	}
}

bool pr_unwind_check(const uint8_t *p, size_t len, int max_codes)
{
	struct pr_unwind u;
	if (len < sizeof u) return false;
	memcpy(&u, p, sizeof u);
	return u.n >= 0 && u.n <= max_codes && u.file_len[0] < PARSER_FILE_LEN &&
	       u.file_len[1] < PARSER_FILE_LEN &&
	       len == sizeof u + (size_t)u.n * 8 + u.file_len[0] + u.file_len[1];
}
