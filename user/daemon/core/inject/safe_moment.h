/* A safe moment for a thread to call pthread_create (the agent's stub, agent.h): the thread
 * holds no allocator lock and no loader lock. Its stack is unwound (by the unprivileged parser,
 * parser/rstacks.h) and every frame's function is checked: none may be an allocation function
 * or allocator internal (glibc's, jemalloc's, tcmalloc's, mimalloc's), a function of the
 * dynamic loader (_dl_*, dlopen and its kin, any frame in ld.so), or pthread_create, fork and
 * their helpers. A stack that cannot be unwound at all is not safe. */
#ifndef MEMTRACED_INJECT_SAFE_MOMENT_H
#define MEMTRACED_INJECT_SAFE_MOMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/user.h>

struct safe_moment;

/* The checker's state for pid (its unwinder, opened at the first check). */
struct safe_moment *safe_moment_open(pid_t pid);
void safe_moment_close(struct safe_moment *m);
/* inject_safe_fn: ctx is a struct safe_moment. */
bool safe_moment_check(void *ctx, pid_t pid, pid_t tid, const struct user_regs_struct *r,
		       char *why, size_t whylen);
/* Is a function of this name one that may hold an allocator or loader lock? (for tests) */
bool safe_moment_unsafe_name(const char *name);

#endif
