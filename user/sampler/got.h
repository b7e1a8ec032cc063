/* GOT redirection (got.c). The *_locked walks run under got_lock. */
#ifndef MEMTRACED_SAMPLER_GOT_H
#define MEMTRACED_SAMPLER_GOT_H

#include <stdbool.h>
#include "internal.h"

int got_init(void) HIDDEN;            /* 0, or -1: no memory for the records */
bool got_lock(bool wait) HIDDEN;      /* false: busy and !wait */
void got_unlock(void) HIDDEN;
long got_patch_locked(void) HIDDEN;   /* slots redirected */
long got_restore_locked(void) HIDDEN; /* slots put back; forgets every record */
/* After mts_real is resolved: a function whose address is the program's canonical PLT entry
 * gets the definition behind it in mts_real, and the PLT address in mts_canonical. */
void got_resolve_canonical(void) HIDDEN;

/* From the first start on, fork waits until no walk is under way (pthread_atfork). */
void got_guard_forks(void) HIDDEN;
#endif
