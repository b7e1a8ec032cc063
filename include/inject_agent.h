/* The region memtraced maps into a target for --inject's agent (user/daemon/core/inject/agent.c):
 * read and written by memtraced through /proc/PID/mem, by the agent's thread in the target (the
 * code in user/daemon/core/inject/agent_code.c), and by the sampler library's
 * memtraced_sampler_agent (user/sampler/agent.c), which carries out the operation. Offsets are
 * fixed: the agent's machine code uses them. Part of MEMTRACED_SAMPLER_VERSION. */
#ifndef MEMTRACED_INJECT_AGENT_H
#define MEMTRACED_INJECT_AGENT_H

#include <stdint.h>

enum inject_agent_op {
	INJECT_AGENT_NONE = 0,  /* only load the library and say its version */
	INJECT_AGENT_START = 1, /* memtraced_sampler_start(arg0, arg1) */
	INJECT_AGENT_STOP = 2,  /* memtraced_sampler_stop() */
};

#define INJECT_AGENT_PATH_MAX 4096

struct inject_agent_region {
	uint64_t nonce;          /*   0: written by the stub that mapped it: memtraced's own */
	uint64_t stub_done;      /*   8: the job number of the last stub back from pthread_create */
	int64_t create_ret;      /*  16: what pthread_create returned */
	uint64_t tid;            /*  24: the agent thread (pthread_t) */
	uint64_t fn_pthread_self, fn_pthread_detach, fn_dlopen, fn_dlsym, fn_dlerror; /* 32..64 */
	uint64_t dl_flags;       /*  72 */
	uint64_t seq;            /*  80: the job's number */
	uint64_t done;           /*  88: = seq when the agent thread has finished the job */
	uint64_t handle;         /*  96: dlopen's result */
	uint64_t agent;          /* 104: the library's memtraced_sampler_agent */
	uint64_t op, arg0, arg1; /* 112, 120, 128: the operation (enum inject_agent_op) */
	int64_t ret;             /* 136: its result */
	uint64_t version;        /* 144: MEMTRACED_SAMPLER_VERSION of the library */
	uint64_t check_addr;     /* 152: its memtraced_sampler_check */
	char agent_name[32];     /* 160: "memtraced_sampler_agent" */
	char errmsg[256];        /* 192: dlerror() when dlopen or dlsym failed */
	char path[INJECT_AGENT_PATH_MAX]; /* 448: the library */
	/* The agent thread's attributes: a stack of stack_size bytes instead of the default
	 * (RLIMIT_STACK, 8 MiB, which glibc then keeps in its stack cache): pthread_attr_init
	 * and pthread_attr_setstacksize on attr, called by the stub. */
	uint64_t fn_attr_init;          /* 4544 */
	uint64_t fn_attr_setstacksize;  /* 4552 */
	uint64_t stack_size;            /* 4560 */
	uint64_t thin_addr;             /* 4568: the library's memtraced_sampler_thin */
	uint64_t stats_addr;            /* 4576: the library's memtraced_sampler_stats */
	uint64_t pad[3];
	unsigned char attr[128] __attribute__((aligned(64))); /* 4608: a pthread_attr_t */
};
#define INJECT_AGENT_STACK_SIZE (256 * 1024)

#define INJECT_AGENT_OFF_STUB_DONE 8
#define INJECT_AGENT_OFF_CREATE_RET 16
#define INJECT_AGENT_OFF_TID 24
#define INJECT_AGENT_OFF_FNS 32
#define INJECT_AGENT_OFF_DL_FLAGS 72
#define INJECT_AGENT_OFF_SEQ 80
#define INJECT_AGENT_OFF_DONE 88
#define INJECT_AGENT_OFF_HANDLE 96
#define INJECT_AGENT_OFF_AGENT 104
#define INJECT_AGENT_OFF_NAME 160
#define INJECT_AGENT_OFF_ERRMSG 192
#define INJECT_AGENT_OFF_PATH 448
#define INJECT_AGENT_OFF_ATTR_INIT 4544
#define INJECT_AGENT_OFF_ATTR_SETSTACKSIZE 4552
#define INJECT_AGENT_OFF_STACK_SIZE 4560
#define INJECT_AGENT_OFF_ATTR 4608

_Static_assert(__builtin_offsetof(struct inject_agent_region, stub_done) == INJECT_AGENT_OFF_STUB_DONE, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, create_ret) == INJECT_AGENT_OFF_CREATE_RET, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, tid) == INJECT_AGENT_OFF_TID, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, fn_pthread_self) == INJECT_AGENT_OFF_FNS, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, dl_flags) == INJECT_AGENT_OFF_DL_FLAGS, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, seq) == INJECT_AGENT_OFF_SEQ, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, done) == INJECT_AGENT_OFF_DONE, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, handle) == INJECT_AGENT_OFF_HANDLE, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, agent) == INJECT_AGENT_OFF_AGENT, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, agent_name) == INJECT_AGENT_OFF_NAME, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, errmsg) == INJECT_AGENT_OFF_ERRMSG, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, path) == INJECT_AGENT_OFF_PATH, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, fn_attr_init) == INJECT_AGENT_OFF_ATTR_INIT, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, fn_attr_setstacksize) == INJECT_AGENT_OFF_ATTR_SETSTACKSIZE, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, stack_size) == INJECT_AGENT_OFF_STACK_SIZE, "layout");
_Static_assert(__builtin_offsetof(struct inject_agent_region, attr) == INJECT_AGENT_OFF_ATTR, "layout");

#endif
