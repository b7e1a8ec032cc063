/* The unprivileged parser: a child process that does all the parsing of files and bytes a
 * target controls (allocator discovery from ELF, unwinding, symbolization, demangling), with
 * no privileges (see parse/confine/confine.h). The daemon talks to it through channels: memory it
 * shares with it, two message rings each (protocol.h). Files it opens go through the
 * daemon's broker, which lets it read the objects and /proc files of the processes the
 * daemon asked it about, and nothing else.
 *
 * The daemon always has one (parser_start at its start); unit tests of the parsing itself
 * call it directly (sites/, unwind/), those of code that asks it start one. */
#ifndef MEMTRACED_PARSER_H
#define MEMTRACED_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "protocol/shm_ring.h"
#include "protocol/sites.h"

/* The parser's executable: memtraced-parse next to ours unless set (a unit test runs itself
 * as the parser: "/proc/self/exe"). */
void parser_set_exe(const char *path);
/* Forks and executes the parser (it confines itself) and starts the broker. Call it while single-threaded.
 * 0, or -1 with a message. */
int parser_start(bool serving_http, char *err, size_t errlen);
bool parser_started(void);
pid_t parser_pid(void);
/* Readable once the parser has exited, or -1. */
int parser_pidfd(void);
/* Why the parser is gone ("killed by SIGSYS: ..."), or NULL while it runs (or never ran). */
const char *parser_gone(void);
/* Ends it (at exit). */
void parser_stop(void);
/* A dead parser reaped and a new one started (as parser_start did, its broker new, no process
 * allowed yet). Every channel of the old one is broken: sessions that used one are finished
 * first. The HTTP server is handed its socket again by parser_relisten. 0, or -1 with a
 * message. */
int parser_restart(bool serving_http, char *err, size_t errlen);

/* The daemon's end of a channel. */
struct pchan {
	void *mem;
	size_t bytes;
	struct shm_ring req, res; /* daemon -> parser, parser -> daemon */
	bool broken;              /* the parser died or broke the protocol: nothing more */
};
/* A new channel, served by a parser thread of its own. NULL with a message. */
struct pchan *pchan_open(char *err, size_t errlen);
void pchan_close(struct pchan *c);
/* The most bytes one message may carry (head and tail together). */
size_t pchan_max_payload(const struct pchan *c);
/* Sends a request of len bytes (head, then tail of tail_len), waiting for room. */
int pchan_send(struct pchan *c, uint32_t type, const void *head, size_t len, const void *tail,
	       size_t tail_len);
/* pchan_try_send that does not wake the parser: a batch of them, then pchan_flush. */
int pchan_try_send_quiet(struct pchan *c, uint32_t type, const void *head, size_t len,
			 const void *tail, size_t tail_len);
void pchan_flush(struct pchan *c);
/* Like pchan_send, but never waits: -1 if there is no room now (or broken). */
int pchan_try_send(struct pchan *c, uint32_t type, const void *head, size_t len,
		   const void *tail, size_t tail_len);
/* The next reply, copied into buf (cap bytes), checked to lie inside the ring and be at most
 * cap long: its type, or -1 when the parser is gone, stuck or broke the protocol (then
 * c->broken, and a message said why). want: how many replies the caller waits for. */
int pchan_recv(struct pchan *c, void *buf, size_t cap, size_t *len, uint32_t want);
/* Like pchan_recv, but never waits: 0 when there is no message now. */
int pchan_try_recv(struct pchan *c, void *buf, size_t cap, size_t *len);
/* The parser sent what it must not (why): it is killed, c is broken. */
void pchan_break(struct pchan *c, const char *why);
/* --listen: hands the listening socket fd to the parser's HTTP server (fd is kept for a
 * restarted parser, never accepted on; the one kept before is closed; fd < 0: none kept);
 * token (non-NULL with --listen-token): every request must carry it. */
int parser_listen(int fd, const char *token, char *err, size_t errlen);
/* After parser_restart: the same socket (kept by the daemon, which never accepts on it:
 * clients queue in its backlog meanwhile) and token to the new parser. */
int parser_relisten(char *err, size_t errlen);
/* Publishes a document the server serves at path (publish.c): 0, or -1 when it cannot now. */
int parser_publish(const char *path, const char *type, const void *bytes, size_t len);
/* --listen's profiles: the next request for one the parser's server holds (0: none now, -1:
 * the parser is gone or sent a bad one), its fields checked (protocol.h's pr_want); and the
 * answer to it (status 200 with the profile, or another with a line of text). */
struct pr_want;
int parser_next_want(struct pr_want *w);
int parser_answer(uint32_t id, unsigned status, const char *type, const void *bytes, size_t len);
/* Sends fd on the control socket with its tag (protocol.h). */
int parser_send_fd(int fd, char tag);

/* The parser may open /proc/PID files of pid (done for every pid a request names). */
void parser_allow_pid(pid_t pid);

/* alloc_sites_for_pid, _for_exec and alloc_sites_added, done by the parser; the result is
 * checked before it is used (paths, counts, offsets inside the files). */
int psites_for_pid(pid_t pid, struct alloc_sites *out, char *err, size_t errlen);
int psites_for_exec(const char *exe, pid_t pid, struct alloc_sites *out, char *err, size_t errlen);
int psites_added(pid_t pid, const struct alloc_sites *have, struct alloc_sites *added,
		 char *err, size_t errlen);

/* One request and its reply (exactly rlen bytes of type rtype) on the daemon's one-shot
 * channel; the caller checks what the reply says. 0, or -1 with a message. */
int parser_rpc(uint32_t type, const void *q, size_t qlen, uint32_t rtype, void *r, size_t rlen,
	       char *err, size_t errlen);

/* The facts of an object file of process pid (elf/objfacts.h), found by the parser: 0, or -1
 * with a message (no such file, not x86-64 ELF, the parser is gone). */
struct elf_facts;
int pfacts_of(pid_t pid, const char *path, const char *symbol, struct elf_facts *f,
	      char *err, size_t errlen);

#endif
