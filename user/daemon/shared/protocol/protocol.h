/* The messages between the daemon and its parser (see parser.h), through a channel's two
 * shm_rings. Fixed layouts, no pointers; every length in a message the daemon reads is
 * checked against the message's own size (parser.c, rstacks.c): a parser taken over by a
 * hostile file can send wrong data, never make the daemon read past a message. */
#ifndef MEMTRACED_PARSER_PROTOCOL_H
#define MEMTRACED_PARSER_PROTOCOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/facts.h"
#include "protocol/python.h"
#include "protocol/sites.h"
#include "protocol/stack_types.h"

#define PARSER_REQ_RING (4u << 20)  /* daemon -> parser, per channel: a message holds up to
                                       half, a 1 MiB stack and its Python frames */
#define PARSER_RES_RING (2u << 20)  /* parser -> daemon */
#define PARSER_MAX_LOC_STRING 1000  /* a file or function name, longer ones are cut */
#define PARSER_MAX_LOCS 128         /* locations of one code (an inline chain), more are cut */
#define PARSER_FILE_LEN 4096

/* The parser is memtraced-parse, started as `memtraced-parse --parser DAEMON_PID` with its
 * control socket on this fd. */
#define PARSER_ARG "--parser"
#define PARSER_CTL_FD 3
#define PARSER_ARG_HTTP "--http" /* a third argument: it will serve HTTP (--listen) */
/* What an fd sent on the control socket is (its one byte of data). */
#define PARSER_TAG_CHANNEL 'C'
#define PARSER_TAG_LISTEN 'L'
#define PARSER_TAG_TOKEN 'T' /* a memfd: the bearer token (--listen-token), before 'L' */
#define PARSER_TOKEN_MAX 256

/* The name under which the parser asks for a debug file from a debuginfod server (libdw's own
 * debuginfod client is off there: it would need the network): the broker fetches
 * BROKER_DEBUGINFOD_PREFIX "<build-id in hex>" with libdebuginfod when DEBUGINFOD_URLS is set
 * (in the daemon's environment) and hands over the file. */
#define BROKER_DEBUGINFOD_PREFIX "/memtraced-debuginfod/"


enum parser_msg {
	/* requests */
	PQ_SITES_PID = 1,   /* struct pq_sites -> PR_SITES */
	PQ_SITES_EXEC,      /* struct pq_sites (exe) -> PR_SITES */
	PQ_SITES_ADDED,     /* struct pq_sites (have) -> PR_SITES */
	PQ_OPEN,            /* struct pq_open -> PR_OPENED */
	PQ_UNWIND,          /* struct pq_unwind + stack bytes -> PR_LOCS..., PR_UNWIND */
	PQ_REFRESH,         /* no payload */
	PQ_FINAL_MAPS,      /* struct pq_final_maps + text: in parts, the last one says so */
	PQ_FACTS,           /* struct pq_facts -> PR_FACTS */
	PQ_PUBLISH,         /* struct pq_publish + the document: served at its path (--listen) */
	PQ_ANSWER,          /* struct pq_answer + the document: the answer to a PR_WANT */
	/* replies */
	PR_SITES = 100,     /* struct pr_sites */
	PR_OPENED,          /* struct pr_opened */
	PR_LOCS,            /* struct pr_locs + locations: a code the daemon has not been told of */
	PR_UNWIND,          /* struct pr_unwind + codes */
	PR_FACTS,           /* struct pr_facts */
	PR_WANT,            /* struct pr_want: unasked, on the channel documents come on */
};

struct pq_sites {
	pid_t pid;
	char exe[PARSER_FILE_LEN];    /* PQ_SITES_EXEC */
	struct alloc_sites have;      /* PQ_SITES_ADDED */
};

struct pr_sites {
	int rc;
	char err[1024];
	struct alloc_sites sites;
};

/* An object's facts (elf/objfacts.h): a file of process pid, a symbol to find in it. */
struct pq_facts {
	pid_t pid;
	char path[PARSER_FILE_LEN];
	char symbol[128];
};

struct pr_facts {
	int rc;
	char err[256];
	struct elf_facts facts;
};

/* A document the daemon rendered, for the parser's HTTP server (parse/http/http.h). */
struct pq_publish {
	char path[64];                /* "/metrics" */
	char type[64];                /* its content type; "" with len 0: removed */
	uint32_t len;                 /* the bytes follow the struct */
};

/* A document built on demand (--listen's /debug/pprof/heap and /allocs): the parser's HTTP
 * server holds the request and asks the daemon, which answers with PQ_ANSWER and the same id.
 * The daemon checks every field (core/parser/publish.c). */
enum pr_want_kind {
	WANT_HEAP,
	WANT_ALLOCS,
	WANT_CANCEL, /* the client of want id is gone: its window ends, unanswered */
};
#define WANT_MAX_SECONDS 60   /* ?seconds=N beyond it is cut to it */
#define WANT_MAX_PENDING 8    /* requests held at once; more get 503 */
struct pr_want {
	uint32_t id;
	uint32_t kind;                /* enum pr_want_kind */
	int32_t pid;                  /* 0: every traced process */
	uint32_t seconds;             /* 0: since attach; N: what the next N seconds allocate */
	uint32_t all_users;           /* 1: the request carried the token (--listen-token): root's
					 processes too; 0: they are left out */
};

struct pq_answer {
	uint32_t id;
	uint32_t status;              /* HTTP status: 200, or 404/503 with a line of text */
	char type[64];                /* the content type */
	uint32_t len;                 /* the bytes follow the struct */
};

/* A channel serves one process's unwinder (PQ_OPEN once, then the others) or the allocator
 * discovery (PQ_SITES_*). */
struct pq_open {
	pid_t pid;
	uint32_t python;              /* enum py_mode */
};

struct pr_opened {
	bool ok;
	char err[256];
	struct stacks_stats stats;
	struct py_found python;       /* its interpreter, when it runs CPython */
};

struct pq_final_maps {
	bool last;
	uint32_t len;                 /* the text follows the struct */
};

struct pq_unwind {
	pid_t tid;
	int32_t start;                /* enum stacks_start */
	int32_t max_codes;
	bool want_files;              /* the objects of frames 0 and 1 (a mapping's caller) */
	uint64_t regs[STACKS_NREGS];
	uint32_t stack_len;           /* the bytes follow the struct (at sizeof) */
	uint16_t py_n, py_status;     /* Python frames (struct mt_py_frame) after the stack bytes,
	                                 at sizeof + stack_len rounded up to 8; enum mt_py_status */
	uint16_t py_codes;            /* then the names of so many code objects (mt_py_code) */
};

struct pr_loc {                       /* then filename_len + defname_len bytes, no NULs */
	uint32_t line, start_char, end_char;
	uint16_t filename_len, defname_len;
};

struct pr_locs {
	uint64_t code;
	uint32_t nlocs;
	uint8_t data[];               /* nlocs of (struct pr_loc, strings), 4-byte aligned */
};

struct pr_unwind {
	int32_t n;                    /* codes that follow (innermost first) */
	uint64_t end;                 /* stacks_last_extent */
	bool truncated;
	struct stacks_stats stats;    /* of the channel's unwinder, as of this result */
	uint16_t file_len[2];         /* want_files: the objects of frames 0 and 1 (0: none) */
	uint64_t codes[];             /* n codes, then the two files' bytes (no NUL) */
};

#endif
