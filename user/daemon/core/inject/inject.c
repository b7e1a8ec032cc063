/* dlopen and dlsym in a running process, and the one-shot helpers, on top of the session
 * calls of ptrace_call.c. The target's own dlopen is called, so the library is loaded by its
 * dynamic linker like any dlopen'ed plugin: constructors run, symbols bind, refcount kept. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "inject_int.h"

/* The first of names that pid's objects export (glibc >= 2.34: in libc.so.6; before: in
 * libdl.so.2 when loaded, else libc's private __libc_dlopen_mode family). */
static int find_first(pid_t pid, const char *const *names, uint64_t *addr, const char **which,
                      char *err, size_t errlen)
{
	char first_err[256] = "";
	for (int i = 0; names[i]; i++) {
		char e[256];
		if (inject_find_symbol(pid, names[i], addr, NULL, 0, e, sizeof(e)) == 0) {
			if (which) *which = names[i];
			return 0;
		}
		if (!first_err[0]) snprintf(first_err, sizeof(first_err), "%s", e);
	}
	inject_err(err, errlen, "%s: cannot load a library into it", first_err);
	return -1;
}

/* The target's dlerror() text after a failed dlopen/dlsym (lib is for the message). */
static void remote_dlerror(struct inject_session *s, const char *what, char *err, size_t errlen)
{
	static const char *const names[] = { "dlerror", NULL };
	uint64_t fn, msg = 0;
	char text[512] = "";
	char e[256];
	if (find_first(inject_session_pid(s), names, &fn, NULL, e, sizeof(e)) == 0 &&
	    inject_session_call(s, fn, NULL, 0, &msg, e, sizeof(e)) == 0 && msg) {
		int fd = inject_mem_open(inject_session_pid(s), false);
		if (fd >= 0) {
			inject_mem_read_str(fd, msg, text, sizeof(text));
			close(fd);
		}
	}
	inject_err(err, errlen, "%s failed in pid %d: %s", what, (int)inject_session_pid(s),
	           text[0] ? text : "(no dlerror message)");
}

int inject_session_dlopen(struct inject_session *s, const char *lib_path, uint64_t *handle,
                          char *err, size_t errlen)
{
	static const char *const names[] = { "dlopen", "__libc_dlopen_mode", NULL };
	uint64_t fn, path_addr;
	if (find_first(inject_session_pid(s), names, &fn, NULL, err, errlen) != 0) return -1;
	if (inject_push(s, lib_path, strlen(lib_path) + 1, &path_addr, err, errlen) != 0) return -1;
	uint64_t args[2] = { path_addr, RTLD_NOW };
	if (inject_session_call(s, fn, args, 2, handle, err, errlen) != 0) return -1;
	if (!*handle) {
		char what[4200];
		snprintf(what, sizeof(what), "dlopen(\"%s\")", lib_path);
		remote_dlerror(s, what, err, errlen);
		return -1;
	}
	return 0;
}

int inject_session_dlsym(struct inject_session *s, uint64_t handle, const char *name,
                         uint64_t *addr, char *err, size_t errlen)
{
	static const char *const names[] = { "dlsym", "__libc_dlsym", NULL };
	uint64_t fn, name_addr;
	if (find_first(inject_session_pid(s), names, &fn, NULL, err, errlen) != 0) return -1;
	if (inject_push(s, name, strlen(name) + 1, &name_addr, err, errlen) != 0) return -1;
	uint64_t args[2] = { handle, name_addr };
	if (inject_session_call(s, fn, args, 2, addr, err, errlen) != 0) return -1;
	if (!*addr) {
		char what[256];
		snprintf(what, sizeof(what), "dlsym(\"%.200s\")", name);
		remote_dlerror(s, what, err, errlen);
		return -1;
	}
	return 0;
}

/* Detaches; the first error wins. */
static int finish(struct inject_session *s, int rc, char *err, size_t errlen)
{
	char e[256];
	if (inject_detach(s, e, sizeof(e)) != 0 && rc == 0) {
		inject_err(err, errlen, "%s", e);
		rc = -1;
	}
	return rc;
}

int inject_call(pid_t pid, uint64_t func, const uint64_t *args, int nargs, uint64_t *ret,
                char *err, size_t errlen)
{
	struct inject_session *s;
	if (inject_attach(pid, &s, err, errlen) != 0) return -1;
	return finish(s, inject_session_call(s, func, args, nargs, ret, err, errlen), err, errlen);
}

int inject_dlopen(pid_t pid, const char *lib_path, uint64_t *handle, char *err, size_t errlen)
{
	struct inject_session *s;
	if (inject_attach(pid, &s, err, errlen) != 0) return -1;
	return finish(s, inject_session_dlopen(s, lib_path, handle, err, errlen), err, errlen);
}

int inject_dlsym(pid_t pid, uint64_t handle, const char *name, uint64_t *addr, char *err,
                 size_t errlen)
{
	struct inject_session *s;
	if (inject_attach(pid, &s, err, errlen) != 0) return -1;
	return finish(s, inject_session_dlsym(s, handle, name, addr, err, errlen), err, errlen);
}
