/* The memtrace trace format (".ctf", formats v1 to v3): public API of the format library.
 *
 * Pure C: no BPF, no knowledge of processes or of the daemon. The byte-level spec is
 * docs/memtrace-format.md; section numbers below refer to it.
 *
 * Conventions:
 *  - Backtraces are arrays of location codes, OUTERMOST FIRST (main ... allocation site),
 *    the order the file and the reader use.
 *  - Location lists are outermost first too (the function holding the call site first,
 *    the innermost inlined function last).
 *  - Times are absolute microseconds since the Unix epoch.
 *  - Functions that can fail return a negative value (or NULL) and leave a message that
 *    says what went wrong in mt_writer_error() / mt_reader_error().
 */
#ifndef MEMTRACE_H
#define MEMTRACE_H

#include <stddef.h>
#include <stdint.h>

#define MT_FORMAT_VERSION 2     /* what the writer writes unless told otherwise */
#define MT_FORMAT_VERSION_MAX 3 /* the newest version the reader reads and the writer can write */
#define MT_MAX_PACKET 32768 /* bytes, header included (sec. 10.1) */

enum mt_source { MT_SOURCE_MINOR = 0, MT_SOURCE_MAJOR = 1, MT_SOURCE_EXTERNAL = 2 };

/* One source location (sec. 5.2). Strings are borrowed (the owner says for how long). */
typedef struct mt_location {
	uint32_t line;       /* saturated by the writer to 0xFFFFF */
	uint32_t start_char; /* saturated to 0xFF */
	uint32_t end_char;   /* saturated to 0x3FF */
	const char *filename;
	const char *defname;
} mt_location;

/* The trace-info event of packet 0 (sec. 5.1). */
typedef struct mt_trace_info {
	double sample_rate; /* per word */
	uint8_t word_size;  /* 64 */
	const char *executable_name;
	const char *host_name;
	const char *ocaml_runtime_params; /* free text for a non-OCaml target; "" is fine */
	uint64_t pid;
	const char *context;    /* "" = no context */
	uint64_t start_time_us; /* timestamp_begin of packet 0: the trace start */
	/* Filled by the reader: the version of packet 0 (1, 2 or 3). The writer ignores it: the
	 * version it writes is chosen with mt_writer_open_format. */
	uint16_t format_version;
	/* v3: the domain of packet 0 (the real library's Info.initial_domain; 0 = the main
	 * domain). The reader sets 0 for v1/v2; a v3 writer writes it in every packet header. */
	uint16_t initial_domain;
} mt_trace_info;

/* ------------------------------------------------------------------------------------
 * Writer (sec. 6.4, 7, 8, 10.2). Given the same events it writes the same bytes as the
 * real memtrace 0.2.3 writer (v2), or, in v3, as the newest real writer for one domain.
 * ------------------------------------------------------------------------------------ */
typedef struct mt_writer mt_writer;

/* Asked on a backtrace-cache miss for the location list of `code`. Sets *locs to an array
 * of n locations (outermost first) that stays valid until the next call, returns n >= 0
 * (0 = no debug info), or < 0 if the code is unknown (written as an empty list). Lists of
 * more than 255 locations, or too large, are replaced by "<unknown>" (sec. 5.2). */
typedef int (*mt_locations_fn)(void *ctx, uint64_t code, const mt_location **locs);

/* Writes packet 0 to fd at once, in format v2 (MT_FORMAT_VERSION), which every released
 * memtrace reads. The fd is not closed by the writer. */
mt_writer *mt_writer_open(int fd, const mt_trace_info *info, mt_locations_fn locations,
			  void *ctx);
/* The same in a chosen format version: 2, or 3 (the newest memtrace's format: a domain,
 * info->initial_domain, in every packet header, and a new events packet every 10,000
 * allocations as its writer does; only readers of v3 read it). Other versions: NULL with
 * errno EINVAL. */
mt_writer *mt_writer_open_format(int fd, const mt_trace_info *info, int format_version,
				 mt_locations_fn locations, void *ctx);
/* An allocation event; the library hands out the id (0, 1, 2, ... in stream order) and
 * returns it (>= 0), or < 0 on error. time_us is clamped to the last time written.
 * Frames beyond what fits in 4096 bytes of codewords are dropped (innermost first). */
int64_t mt_writer_alloc(mt_writer *w, uint64_t time_us, uint64_t length_words,
			uint64_t nsamples, enum mt_source source, const uint64_t *backtrace,
			size_t backtrace_len);
/* Rewrites packet 0's context string in place, with one of the same length (a field the
 * writer of the trace keeps at a fixed width, such as memtraced's "drops: N" counted up to the
 * end of the trace). Only on a file the writer could seek when it opened it: -1 with errno
 * ESPIPE on a pipe, EINVAL when the length differs. */
int mt_writer_set_context(mt_writer *w, const char *context);
/* memtraced's convention: a context string with "drops: N" (samples the tracer lost), as of
 * the end of the trace. 1 and *drops when the context says so, 0 when it does not. */
int mt_context_drops(const char *context, uint64_t *drops);
int mt_writer_promote(mt_writer *w, uint64_t time_us, uint64_t id);
int mt_writer_collect(mt_writer *w, uint64_t time_us, uint64_t id);
/* Writes what is buffered (location packets, then the events packet) with one write() per
 * packet, and starts a new events packet at time_us (clamped). */
int mt_writer_flush(mt_writer *w, uint64_t time_us);
/* Final flush at the last event time, frees the writer; returns < 0 if any write failed.
 * After a failed write, a regular file ends with the last whole packet (the part of a packet
 * a full disk took is cut off again); a pipe or socket keeps what it took. */
int mt_writer_close(mt_writer *w);
const char *mt_writer_error(const mt_writer *w);
uint64_t mt_writer_next_id(const mt_writer *w);
/* Bytes written so far; on a regular file, the file's length from the writer's start. */
uint64_t mt_writer_bytes_written(const mt_writer *w);

/* ------------------------------------------------------------------------------------
 * Reader (sec. 11): streaming, bounded memory (a packet at a time, the location table, and
 * the decoder state of each domain). A v1/v2 trace (packet 0 says 1 or 2) is read as the
 * real 0.2.3 reader reads it: an error where it raises one, a warning and a skipped packet
 * where it skips one. A v3 trace is read as the newest real reader reads it: decoder state
 * per domain, allocation ids counted per packet from its alloc_id_begin (not 0, 1, 2, ...
 * when several domains allocate), packets of versions 1..3.
 * ------------------------------------------------------------------------------------ */
typedef struct mt_reader mt_reader;

enum mt_event_type { MT_EV_ALLOC = 1, MT_EV_PROMOTE = 2, MT_EV_COLLECT = 3 };

typedef struct mt_event {
	enum mt_event_type type;
	uint64_t time_us; /* absolute; subtract info.start_time_us for the time since start */
	uint16_t domain;  /* the domain of the packet (v3); 0 in v1/v2 */
	uint64_t id;      /* allocation id (alloc), or the id promoted/collected */
	/* alloc only: */
	uint64_t length; /* words */
	uint64_t nsamples;
	enum mt_source source;
	const uint64_t *backtrace; /* outermost first; valid until the next mt_reader_next */
	size_t backtrace_len;
	/* The first common_prefix codes (all of them when it exceeds backtrace_len) are those
	 * of the previous allocation returned, whatever its domain. */
	size_t common_prefix;
} mt_event;

/* Warnings (skipped packets) go to this callback; NULL = print "warning: ..." to stderr. */
typedef void (*mt_warn_fn)(void *ctx, const char *message);

/* Reads and checks packet 0. Returns NULL on error; then *err (if given) receives a
 * malloc'd message the caller frees. The fd is not closed by the reader. */
mt_reader *mt_reader_open(int fd, mt_warn_fn warn, void *warn_ctx, char **err);
const mt_trace_info *mt_reader_info(const mt_reader *r);
/* The latest end time (timestamp_end) of the packets read so far: where the trace's writer
 * says its trace goes, past its last event (memtraced ends a trace with an empty packet at the
 * time tracing ended). */
uint64_t mt_reader_packets_end_us(const mt_reader *r);
/* 1 = *ev filled, 0 = end of trace, -1 = malformed trace (mt_reader_error says what and
 * where: packet number and byte offset). */
int mt_reader_next(mt_reader *r, mt_event *ev);
/* The location list of a code described so far: n >= 0, or -1 if never described. The
 * array and its strings live as long as the reader. */
int mt_reader_lookup(const mt_reader *r, uint64_t code, const mt_location **locs);
const char *mt_reader_error(const mt_reader *r);
void mt_reader_close(mt_reader *r);

#endif
