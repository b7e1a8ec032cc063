/* A host service's parser deaths and reloads (see service_life.h). */
#include "service_life.h"
#include "parser/parser.h"
#include "parser/rstacks.h"
#include "output/trace_out.h"
#include "protocol/protocol.h"
#include "common/msg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every session ends (why), the processes are no longer watched for exec and dlopen. */
static void end_all(struct targets *ts, enum finish_why why)
{
	for (int i = 0; i < ts->n; i++) target_finish(ts, ts->t[i], why, NULL);
	if (ts->lc)
		for (int i = 0; i < ts->n; i++) lifecycle_unwatch(ts->lc, ts->t[i]->pid);
	bool ok = true;
	targets_drop_finished(ts, &ok);
	targets_forget_wants();
}

/* A host service whose parser died served nothing more, for ever (issue 36). Its sessions
 * end (their unwinders were the parser's), a new parser starts, is handed the listening socket
 * again, and every selected process is traced anew. More than PARSER_MAX_RESTARTS deaths in
 * PARSER_RESTART_WINDOW_S: it stops with status 1, and its service manager restarts it
 * (Restart=on-failure). Returns whether tracing goes on. */
#define PARSER_MAX_RESTARTS 5
#define PARSER_RESTART_WINDOW_S 60
bool service_parser_died(struct targets *ts, struct status_view **view, const char *gone)
{
	static uint64_t deaths[PARSER_MAX_RESTARTS]; /* the last ones */
	static unsigned ndeaths;
	uint64_t now = trace_out_mono_now_ns();
	int recent = 0;
	for (unsigned i = 0; i < ndeaths && i < PARSER_MAX_RESTARTS; i++)
		recent += now - deaths[i] < PARSER_RESTART_WINDOW_S * 1000000000ULL;
	if (recent >= PARSER_MAX_RESTARTS) {
		for (int i = 0; i < ts->n; i++) target_finish(ts, ts->t[i], FINISH_PARSER_DIED, NULL);
		status_close(*view);
		*view = NULL;
		msg_error("the unprivileged parser is gone (%s), %d times in %d s: stopping with "
			  "status 1 (a service manager restarts memtraced: Restart=on-failure)", gone,
			  recent + 1, PARSER_RESTART_WINDOW_S);
		return false;
	}
	deaths[ndeaths++ % PARSER_MAX_RESTARTS] = now;
	msg_warn("the unprivileged parser is gone (%s): starting a new one%s", gone,
		 recent ? " after a pause" : "");
	end_all(ts, FINISH_PARSER_DIED);
	if (recent) usleep(100000u << (recent - 1)); /* 0.1, 0.2, 0.4, 0.8 s: a parser that dies at once */
	char err[512] = "";
	if (parser_restart(ts->o->listen != NULL, err, sizeof err) < 0 ||
	    parser_relisten(err, sizeof err) < 0) {
		msg_error("cannot start a new parser: %s: stopping with status 1", err);
		return false;
	}
	ts->parser_restarts++;
	rstacks_set_python_mode(ts->o->python);
	targets_select_running(ts);
	return true;
}

static bool same(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

void service_reload(struct targets *ts, int argc, char **argv)
{
	struct cli_opts *o = (struct cli_opts *)ts->o, *n = calloc(1, sizeof *n);
	char err[1024] = "", token[PARSER_TOKEN_MAX + 1] = "";
	if (!o->options_file) {
		msg_warn("SIGHUP: no --options-file to read again: nothing changes");
		free(n);
		return;
	}
	/* everything checked before anything ends: a bad file changes nothing */
	enum cli_result r = n ? cli_parse(argc, argv, n, err, sizeof err) : CLI_ERROR;
	if (r == CLI_OK && (n->npids || n->cmd || !select_active(&n->select)))
		snprintf(err, sizeof err, "the options select no process by --match or --cgroup (or "
			 "name -p PIDs or a command)"), r = CLI_ERROR;
	if (r == CLI_OK && n->listen_token &&
	    targets_read_token(n->listen_token, token, sizeof token, err, sizeof err) < 0)
		r = CLI_ERROR;
	/* a token is read by the server at its start: a new token file means a new server */
	bool relisten = !same(n->listen, o->listen) || n->listen_public != o->listen_public ||
			!same(n->listen_token, o->listen_token);
	int lfd = -1;
	if (r == CLI_OK && relisten && n->listen &&
	    (lfd = targets_listen(n->listen, n->listen_public, err, sizeof err)) < 0)
		r = CLI_ERROR;
	if (r != CLI_OK) {
		msg_warn("SIGHUP: %s: the options stay as they were", err[0] ? err : "out of memory");
		if (n) cli_free(n);
		free(n);
		return;
	}
	msg_info("SIGHUP: options read again from %s: every process is traced anew%s%s",
		 o->options_file, relisten && n->listen ? ", served on " : "",
		 relisten && n->listen ? n->listen : relisten ? ", served no more" : "");
	end_all(ts, FINISH_RELOAD);
	cli_free(o);
	*o = *n; /* n's strings point into its own storage, now o's */
	free(n);
	msg_set_quiet(o->quiet);
	targets_serve_root_profiles(o->listen_root_profiles);
	if (relisten) {
		/* the HTTP server is the parser's: a new one for the new socket */
		if (parser_restart(o->listen != NULL, err, sizeof err) < 0 ||
		    parser_listen(lfd, o->listen_token ? token : NULL, err, sizeof err) < 0) {
			msg_error("SIGHUP: %s", err);
		}
	}
	rstacks_set_python_mode(o->python);
	targets_select_running(ts);
}
