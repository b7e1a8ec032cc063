/* SystemTap SDT notes (.note.stapsdt, the USDT probes a program or library carries). */
#ifndef MEMTRACED_ELF_USDT_NOTES_H
#define MEMTRACED_ELF_USDT_NOTES_H
#include <stdbool.h>

#include "elfobj.h"

/* Does o carry a USDT probe provider:name? Malformed notes are skipped. */
bool elfobj_has_usdt(const struct elfobj *o, const char *provider, const char *name);

#endif
