/* Heap snapshots of service mode (--snapshot-dir DIR --snapshot-interval SEC), see
 * docs/snapshots.md.
 *
 * Snapshot number SEQ of process PID is two files in DIR:
 *   memtrace-PID-SEQ.ctf     a memtrace v2 trace with one allocation event per sampled block
 *                            live at that moment (its original time and stack), so any memtrace
 *                            reader shows the live heap of that moment;
 *   memtrace-PID-SEQ.folded  live bytes per context in the collapsed-stack format of flame-graph
 *                            tools: "outer;...;inner <bytes>" per line.
 * Each file appears whole (temporary name, fsync, rename without replacing), never overwrites
 * an existing file and never follows a symlink. The trie is only read.
 *
 * Not thread-safe: use one snapshotter from the thread that owns the trie. */
#ifndef MEMTRACED_SNAPSHOT_H
#define MEMTRACED_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"
#include "model/trie.h"

struct snapshot_opts {
	const char *dir;  /* must exist and be a directory (not a symlink) we can write in */
	unsigned keep;    /* > 0: keep only the newest `keep` snapshots of this pid; 0 = keep all */
	mode_t file_mode; /* permissions of the files; 0 = 0600 */
	bool create;      /* dir does not exist: make it (mode 0700; its parent must exist and be
			     safe) */
};

struct snapshotter;

/* Checks DIR up front (exists, is a directory, not a symlink, writable) and keeps it open.
 * The first SEQ is one past the highest SEQ already in DIR for this pid (0 in a fresh DIR),
 * so a second run on the same pid does not collide with the first. NULL with a message in err
 * on error. */
struct snapshotter *snapshot_open(const struct snapshot_opts *opts, pid_t pid, char *err,
				  size_t errlen);

/* Writes snapshot number snapshot_next_seq() of the blocks live in t. info_template gives the
 * trace info (executable, host, context...; NULL = defaults); its start time is replaced by
 * the earliest live block's time (now_us if none), its sample rate (if 0) by the trie's, its
 * pid (if 0) by ours. locs describes location codes (e.g. stacks_locations). Blocks whose time
 * was never set (time_us 0) are written at now_us.
 *
 * Returns 0, or a negative errno value with a one-line message in err: -ENOSPC/-EDQUOT/-EIO
 * (disk full or failing), -ENOENT (DIR vanished: the next call looks for it again), -EEXIST (a
 * file already has the target name: it is left alone, the SEQ is skipped), -ENOMEM... On any
 * error the temporary files are removed and the next call tries again. */
int snapshot_write(struct snapshotter *s, const struct trie *t, const mt_trace_info *info_template,
		   mt_locations_fn locs, void *locs_ctx, uint64_t now_us, char *err, size_t errlen);

/* The SEQ the next snapshot_write will use. */
uint64_t snapshot_next_seq(const struct snapshotter *s);
/* Snapshots written whole so far (both files), and failed attempts. */
uint64_t snapshot_written(const struct snapshotter *s);
uint64_t snapshot_failures(const struct snapshotter *s);
const char *snapshot_dir(const struct snapshotter *s);

void snapshot_close(struct snapshotter *s);

#endif
