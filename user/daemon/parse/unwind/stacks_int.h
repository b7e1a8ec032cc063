/* The unwinder's state, shared by stacks.c (opening, unwinding, codes) and stacks_dwfl.c (the
 * callbacks libdw calls). Not an interface. */
#ifndef MEMTRACED_UNWIND_STACKS_INT_H
#define MEMTRACED_UNWIND_STACKS_INT_H
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "unwind_memo.h"
#include "maps.h"
#include "perfmap.h"
#include "stacks.h"
#include "symindex.h"
#include "symbolize.h"
#include "u64map.h"

#define CODE_MASK ((UINT64_C(1) << 62) - 1)
/* Automatic re-reads of the mappings (a pc in no known object) at most this often. */
#define AUTO_REFRESH_INTERVAL_NS 200000000ull
#define EARLY_REFRESHES 4
/* A failed read this far above the stack copy is "the stack goes on" (truncation). */
#define STACK_SPAN (64ull << 20)
/* Frames collected per unwind before giving up (recursion gone wild, a CFI loop). */
#define MAX_FRAMES 2048
/* /proc/PID/maps read at most this far (a process with a million mappings: the rest unknown) */
#define MAPS_TEXT_MAX (64u << 20)


/* ---- objects and codes ---- */
struct object {          /* one per Dwfl_Module, hung on the module's userdata */
	uint64_t hash;       /* of the build-id, or of the path when there is none */
	bool shared;         /* it has a build-id: its frames are symbolized once for every
	                        process (symcache.h) */
	Dwarf_Addr bias;     /* load address - ELF address */
	enum symbolize_depth depth; /* lowered when the object goes over a cap */
	uint64_t symbolize_ns;      /* time spent symbolizing its frames */
	struct symindex syms;       /* its symbols by address, built at its first frame */
	bool capped;                /* counted in stats.capped_objects */
	struct object *next; /* all objects, for stacks_close */
};

struct code_entry {
	uint64_t code, obj_hash, offset;
	mt_location *locs;
	int nlocs;
};

struct frame_pc {
	Dwarf_Addr pc; /* already the call site (return address - 1) for non-activation frames */
};

struct stacks {
	pid_t pid;
	Dwfl *dwfl;
	Elf *backend_elf; /* tells dwfl_attach_state the machine; lives as long as dwfl (below) */
	int mem_fd;  /* /proc/PID/mem, -1 if it could not be opened */
	int root_fd; /* the target's root when it is not ours (O_PATH), else -1 */
	char root_path[32]; /* "/proc/PID/root": how libdw names files opened under root_fd */
	char *object_path;  /* stacks_open_object: the one ELF file, loaded at object_base */
	uint64_t object_base;
	uint64_t last_refresh_ns;

	/* the sample being unwound */
	pid_t tid;
	const uint64_t *regs;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t sp;
	bool truncated;
	struct maps_view view;    /* copies and JIT code: what libdw does not see (maps.c) */
	struct perfmap perfmap;   /* names of JIT code, when the program writes them */
	char *final_maps;         /* the target's /proc/PID/maps at its exit (stacks_set_final_maps) */
	uint64_t max_read;        /* past the highest copied byte the unwinder read */
	uint64_t last_end;        /* of the last sample unwound to its end, else 0 */
	bool frames_capped; /* the unwinder gave up at limits.max_frames */
	int frame_index;
	enum stacks_start start;  /* what frame 0 is */
	Dwfl_Module *hidden;      /* that object, while its frames are being left out */
	Dwarf_Addr hidden_pc;     /* the last of them: the wrapper the program called */
	struct frame_pc frames[MAX_FRAMES];
	int nframes;
	struct unwind_memo memo;  /* unwinds remembered (unwind_memo.h) */
	struct u64map cfa_kinds;  /* pc -> how its frame finds its CFA + 1 (memo_how) */

	struct u64map pc_codes;   /* pc -> code */
	uint64_t cap_code;        /* "[over the cap of distinct frames]" once made, else 0 */
	struct u64map jit_pcs;    /* JIT pcs counted (pc_codes is cleared when the mappings
	                             are read again; pc -> 1 named, 2 not) */
	struct u64map code_index; /* code -> index in entries + 1 */
	struct code_entry *entries;
	size_t nentries, entries_cap;
	struct object *objects;

	struct stacks_stats stats;
	struct stacks_limits limits;

	/* Python (stacks_python.c) */
	struct pyproc *py;        /* its interpreter, when it runs CPython 3.11+ */
	enum py_mode py_mode;
	const struct mt_py_frame *py_frames; /* the sample being unwound's, innermost first */
	struct mt_py_frame py_buf[MT_PY_MAX_FRAMES]; /* ... without the BPF walk's placeholders */
	int py_n, py_status, py_next;
	struct u64map py_codes;   /* (file, qualname, line) -> code */
};


/* The struct stacks whose Dwfl the calling thread is using: libdw's find_elf callback gets no
 * argument of ours (and 0.188 has no module -> Dwfl accessor). Set by every public function
 * that may make libdw load an object; one struct stacks is used by one thread at a time. */
extern __thread struct stacks *stacks_current;

/* FNV-1a style mixing of bytes into a seed (codes and object hashes). */
static inline uint64_t hash_bytes(uint64_t seed, const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed; /* FNV-1a, then mixed */
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= UINT64_C(0x100000001b3);
	}
	return u64_mix(h);
}

/* stacks_python.c: the sample's Python frames, taken in order by stacks.c's loop. */
struct py_location;
bool stacks_py_left(const struct stacks *s);               /* frames not taken yet */
bool stacks_py_splices(const struct stacks *s, uint64_t pc); /* pc runs the eval loop */
bool stacks_py_in_interpreter(const struct stacks *s, uint64_t pc); /* its object's code */
bool stacks_py_hides(const struct stacks *s, uint64_t pc);  /* --python=only: the interpreter's */
/* The next frame's location: 0, or -1 when its code object is gone; *last: the last one of
 * its eval-loop activation. */
int stacks_py_take(struct stacks *s, struct py_location *loc, bool *last);
void stacks_py_done(struct stacks *s);

/* stacks_dwfl.c */
extern const Dwfl_Callbacks stacks_proc_callbacks;
extern const Dwfl_Thread_Callbacks stacks_thread_callbacks;
void stacks_open_target_root(struct stacks *s);
int stacks_cb_frame(Dwfl_Frame *frame, void *arg);
struct object *stacks_module_object(struct stacks *s, Dwfl_Module *mod);
/* Counts mod's object as capped (once) and notes which cap in stats.capped_note. */
void stacks_note_cap(struct stacks *s, Dwfl_Module *mod, const char *cap);

/* One walk of the sample set in s (stacks_walk.c): its frames into s->frames, s->nframes;
 * dwfl_getthread_frames's result. */
int stacks_walk(struct stacks *s);
/* Is pc in a process's or a thread's first function (_start, clone...)? (stacks_walk.c) */
bool stacks_at_entry_point(struct stacks *s, Dwarf_Addr pc);

/* A frame that stands for the operator new the program called where the in-process sampler's
 * wrapper sat (stacks_sampler.h): this bit | its index. */
#define STACKS_SAMPLER_FRAME (1ull << 63)

#endif
