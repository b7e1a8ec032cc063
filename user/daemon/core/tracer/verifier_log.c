/* The reason in a BPF verifier's log (verifier_log.h). */
#include "verifier_log.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool statistics(const char *line, size_t len)
{
	static const char *const stats[] = {"processed ", "verification time", "stack depth",
					    "max_states_per_insn", "mark_read"};
	for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
		size_t n = strlen(stats[i]);
		if (len >= n && memcmp(line, stats[i], n) == 0) return true;
	}
	return false;
}

void verifier_reason(const char *log, char *out, size_t outlen)
{
	if (outlen) out[0] = 0;
	const char *begin = strstr(log, "-- BEGIN PROG LOAD LOG --");
	const char *end = strstr(begin ? begin : log, "-- END PROG LOAD LOG --");
	if (!end) return;
	const char *floor = begin ? begin : log;
	for (const char *e = end; e > floor;) {
		while (e > floor && e[-1] == '\n') e--;
		const char *b = e;
		while (b > floor && b[-1] != '\n') b--;
		if (b == floor && begin) return; /* the BEGIN line itself */
		size_t len = (size_t)(e - b);
		if (len && !statistics(b, len)) {
			snprintf(out, outlen, "%.*s", (int)len, b);
			return;
		}
		e = b;
	}
}
