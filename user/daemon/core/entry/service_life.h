/* What a host service (--match, --cgroup) lives through besides its processes: its parser's
 * death, and a reload (SIGHUP: the options file read again). Both end every session, their
 * traces and final snapshots written whole, and trace every selected process anew. */
#ifndef MEMTRACED_SERVICE_LIFE_H
#define MEMTRACED_SERVICE_LIFE_H

#include <stdbool.h>

#include "status.h"
#include "targets/targets.h"

/* The parser is gone (why): a new one, with backoff; false when memtraced must stop (the
 * sixth death in a minute, or no new parser): it said why. */
bool service_parser_died(struct targets *ts, struct status_view **view, const char *gone);
/* SIGHUP: the command line (argc, argv as main got them) parsed again, --options-file read
 * again; the new options replace ts->o's when they are valid, else nothing changes (it says
 * why). */
void service_reload(struct targets *ts, int argc, char **argv);

#endif
