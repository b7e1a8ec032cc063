/* The dlsym and dlvsym wrappers: a pointer to an allocation function looked up after the
 * placement leads to the sampler's wrapper, as a call through a GOT slot does (issue 47: 0 of
 * 1000 calls through dlsym(RTLD_DEFAULT, "malloc") were seen, "GOT check passed" all along).
 *
 * glibc's dlsym takes its caller from its return address: RTLD_NEXT searches the objects after
 * the caller's, RTLD_DEFAULT the caller's scope (its namespace; its own definitions first under
 * RTLD_DEEPBIND). So the entry (asm below) keeps the caller's return address and tail-jumps to
 * the real function for every lookup but these:
 *   - an explicit handle (the caller plays no part), and
 *   - RTLD_DEFAULT from an object of the base namespace with no definition of the name of its
 *     own (the lookup made from here finds what the caller's would),
 * of a wrapped allocation name, while the sampler is started. Their result becomes the wrapper
 * where it is the very function the wrapper calls. RTLD_NEXT is never changed: an interposer
 * looking for the next malloc calls it from its own malloc, which the GOT slots lead to already
 * (a wrapper there would count each call twice). */
#include <dlfcn.h>
#include <link.h>
#include "internal.h"

void *mts_dlsym_real HIDDEN;
void *mts_dlvsym_real HIDDEN;

/* The allocation function name is one of ours: its wrap entry, else NULL. */
static const struct wrap_entry *allocation_name(const char *name)
{
	if (!name || !mts_config.active)
		return NULL;
	const struct wrap_entry *w = mts_wrap_by_name(name);
	return w && w->fn < MTS_DLOPEN ? w : NULL;
}

/* Does a lookup of name from the object holding ret find, from here, what it would find from
 * there? The base namespace, and no definition of the caller's own. */
static bool same_from_here(const char *name, void *ret)
{
	Dl_info info;
	struct link_map *lm = NULL;
	Lmid_t ns = -1;
	if (!dladdr1(ret, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm ||
	    dlinfo(lm, RTLD_DI_LMID, &ns) != 0 || ns != LM_ID_BASE)
		return false;
	void *own = ((void *(*)(void *, const char *))mts_dlsym_real)(lm, name);
	struct link_map *def = NULL;
	return !own || !dladdr1(own, &info, (void **)&def, RTLD_DL_LINKMAP) || def != lm;
}

/* 1: the lookup is made here (mts_dlsym_here); 0: the entry tail-jumps to the real one. */
HIDDEN int mts_dlsym_ours(void *handle, const char *name, void *ret)
{
	if (handle == RTLD_NEXT || !allocation_name(name))
		return 0;
	return handle != RTLD_DEFAULT || same_from_here(name, ret);
}

static void *wrapped(const char *name, void *r)
{
	const struct wrap_entry *w = allocation_name(name);
	return w && r && r == *w->real ? w->wrapper : r;
}

HIDDEN void *mts_dlsym_here(void *handle, const char *name)
{
	return wrapped(name, ((void *(*)(void *, const char *))mts_dlsym_real)(handle, name));
}

HIDDEN void *mts_dlvsym_here(void *handle, const char *name, const char *version)
{
	void *(*real)(void *, const char *, const char *) =
		(void *(*)(void *, const char *, const char *))mts_dlvsym_real;
	return wrapped(name, real(handle, name, version));
}

/* The entries: the arguments kept across the decision, the caller's return address as its
 * last argument, the stack 16-byte aligned at the call (8 on entry, 3 pushes of 8). */
__asm__(".intel_syntax noprefix\n"
	".text\n"
	".globl mts_dlsym\n"
	".hidden mts_dlsym\n"
	".type mts_dlsym, @function\n"
	"mts_dlsym:\n"
	"	endbr64\n"
	"	push rdi\n"
	"	push rsi\n"
	"	push rsi\n"
	"	mov rdx, [rsp + 24]\n"
	"	call mts_dlsym_ours\n"
	"	pop rsi\n"
	"	pop rsi\n"
	"	pop rdi\n"
	"	test eax, eax\n"
	"	jnz mts_dlsym_here\n"
	"	jmp qword ptr [rip + mts_dlsym_real]\n"
	".size mts_dlsym, . - mts_dlsym\n"
	".globl mts_dlvsym\n"
	".hidden mts_dlvsym\n"
	".type mts_dlvsym, @function\n"
	"mts_dlvsym:\n"
	"	endbr64\n"
	"	push rdi\n"
	"	push rsi\n"
	"	push rdx\n"
	"	mov rdx, [rsp + 24]\n"
	"	call mts_dlsym_ours\n"
	"	pop rdx\n"
	"	pop rsi\n"
	"	pop rdi\n"
	"	test eax, eax\n"
	"	jnz mts_dlvsym_here\n"
	"	jmp qword ptr [rip + mts_dlvsym_real]\n"
	".size mts_dlvsym, . - mts_dlvsym\n"
	".att_syntax prefix\n");
