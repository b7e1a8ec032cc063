#include "notes.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void notes_add(char *notes, size_t len, const char *fmt, ...)
{
	size_t used = strlen(notes);
	if (used + 3 >= len) return;
	if (used) used += snprintf(notes + used, len - used, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(notes + used, len - used, fmt, ap);
	va_end(ap);
}
