#include "msg.h"

#include <stdarg.h>

static bool quiet;
static void (*before_print)(void);

void msg_set_quiet(bool q) { quiet = q; }
void msg_set_before_print(void (*fn)(void)) { before_print = fn; }

FILE *msg_stream(void)
{
	if (before_print) before_print();
	return stderr;
}

static void say(const char *kind, const char *fmt, va_list ap)
{
	FILE *out = msg_stream();
	fprintf(out, "memtraced: %s", kind);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
}

#define MSG_FN(name, kind, skip_when_quiet)        \
	void name(const char *fmt, ...)                \
	{                                              \
		if ((skip_when_quiet) && quiet) return;    \
		va_list ap;                                \
		va_start(ap, fmt);                         \
		say(kind, fmt, ap);                        \
		va_end(ap);                                \
	}

MSG_FN(msg_info, "", true)
MSG_FN(msg_note, "note: ", true)
MSG_FN(msg_say, "", false)
MSG_FN(msg_warn, "warning: ", false)
MSG_FN(msg_error, "error: ", false)
