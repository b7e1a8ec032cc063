/* --options-file (see options_file.h). */
#include "options_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "out_file.h" /* mt_path_split */

#define OPTIONS_FILE_MAX (64 * 1024)
#define OPTIONS_WORDS_MAX 256

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The value after '=' in place: unquoted, trailing spaces cut. NULL: an unclosed quote. */
static char *unquote(char *v)
{
	while (is_space(*v)) v++;
	if (*v == '"' || *v == '\'') {
		char q = *v++;
		char *w = v, *r = v;
		for (; *r && *r != q; r++) {
			if (q == '"' && *r == '\\' && r[1]) r++; /* \" and \\ inside double quotes */
			*w++ = *r;
		}
		if (*r != q) return NULL;
		*w = '\0';
		return v;
	}
	size_t n = strlen(v);
	while (n > 0 && is_space(v[n - 1])) v[--n] = '\0';
	return v;
}

static int add(struct options_words *o, char *word)
{
	if (o->n >= OPTIONS_WORDS_MAX) return -1;
	o->w[o->n++] = word;
	o->w[o->n] = NULL;
	return 0;
}

/* A value's words (split on white space) appended; they stay in the buffer. */
static int add_split(struct options_words *o, char *v)
{
	for (char *save = NULL, *t = strtok_r(v, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
		if (add(o, t) < 0) return -1;
	return 0;
}

/* The file's directory, when others than root (and whoever runs memtraced) may write it, or
 * NULL (issue 46: a user who may write there could swap the file for a link between two
 * steps). A sticky directory keeps a name its owner's. */
static const char *dir_unsafe(int dirfd)
{
	struct stat st;
	if (fstat(dirfd, &st) < 0) return "its directory cannot be read";
	if (st.st_uid != 0 && st.st_uid != geteuid()) return "in a directory of another user than root";
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
		return "in a directory others than its owner may write";
	return NULL;
}

/* path opened read-only in its directory, never through a symbolic link at its name. */
static int open_checked(const char *path, char *err, size_t errlen)
{
	char dir[4096];
	const char *base;
	if (mt_path_split(path, dir, sizeof dir, &base) < 0) {
		snprintf(err, errlen, "--options-file: the path is too long");
		return -1;
	}
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		snprintf(err, errlen, "--options-file %s: its directory: %s", path, strerror(errno));
		return -1;
	}
	const char *bad = dir_unsafe(dirfd);
	int fd = bad ? -1 : openat(dirfd, base, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	int e = errno;
	close(dirfd);
	if (bad) snprintf(err, errlen, "--options-file %s: %s", path, bad);
	else if (fd < 0 && e == ELOOP)
		snprintf(err, errlen, "--options-file %s: a symbolic link (give the file itself)", path);
	else if (fd < 0) snprintf(err, errlen, "--options-file %s: %s", path, strerror(e));
	return fd;
}

int options_file_read(const char *path, struct options_words *out, char *err, size_t errlen)
{
	*out = (struct options_words){0};
	int fd = open_checked(path, err, errlen);
	if (fd < 0) return -1;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "--options-file %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	/* what it selects is traced as root: only root (or whoever runs memtraced) may write it */
	const char *bad = !S_ISREG(st.st_mode)		   ? "not a regular file"
			  : st.st_size > OPTIONS_FILE_MAX	   ? "larger than 64 KiB"
			  : (st.st_mode & 022)			   ? "writable by others than its owner"
			  : st.st_uid != 0 && st.st_uid != geteuid() ? "owned by another user than root"
								   : NULL;
	if (bad) {
		snprintf(err, errlen, "--options-file %s: %s", path, bad);
		close(fd);
		return -1;
	}
	/* the listen value and "--listen" need room of their own: a few bytes more */
	out->buf = calloc(1, (size_t)st.st_size + 16);
	out->w = calloc(OPTIONS_WORDS_MAX + 1, sizeof *out->w);
	ssize_t n = out->buf && out->w ? read(fd, out->buf, (size_t)st.st_size) : -1;
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "--options-file %s: %s", path, out->buf && out->w ? strerror(errno) : "out of memory");
		options_words_free(out);
		return -1;
	}
	static char listen_opt[] = "--listen";
	int lineno = 0;
	for (char *save = NULL, *line = strtok_r(out->buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		lineno++; /* (empty lines are skipped by strtok_r: the number is of the non-empty) */
		while (is_space(*line)) line++;
		if (!*line || *line == '#' || *line == ';') continue;
		char *eq = strchr(line, '=');
		if (!eq) {
			snprintf(err, errlen, "--options-file %s: line %d: expected KEY=VALUE", path, lineno);
			options_words_free(out);
			return -1;
		}
		*eq = '\0';
		char *key = line, *v = unquote(eq + 1);
		size_t kl = strlen(key);
		while (kl > 0 && is_space(key[kl - 1])) key[--kl] = '\0';
		if (!v) {
			snprintf(err, errlen, "--options-file %s: line %d: the value of %s has no closing quote",
				 path, lineno, key);
			options_words_free(out);
			return -1;
		}
		int rc = 0;
		if (strcmp(key, "MEMTRACED_SELECT") == 0 || strcmp(key, "MEMTRACED_OPTS") == 0)
			rc = add_split(out, v);
		else if (strcmp(key, "MEMTRACED_LISTEN") == 0 && *v)
			rc = add(out, listen_opt) < 0 ? -1 : add(out, v);
		if (rc < 0) {
			snprintf(err, errlen, "--options-file %s: more than %d options", path,
				 OPTIONS_WORDS_MAX);
			options_words_free(out);
			return -1;
		}
	}
	return 0;
}

void options_words_free(struct options_words *w)
{
	free(w->w);
	free(w->buf);
	*w = (struct options_words){0};
}
