/* --options-file FILE: memtraced's options kept in a file, read at the start and again at
 * SIGHUP (a service manager's reload: `systemctl reload memtraced`). The file is the unit's
 * environment file (docs/fleet/memtraced.env): KEY=VALUE lines, '#' comments, a value bare or
 * in double or single quotes. MEMTRACED_SELECT and MEMTRACED_OPTS are options, split on white
 * space as systemd splits $VAR; MEMTRACED_LISTEN is --listen's value (none when empty). Other
 * keys are left alone. */
#ifndef MEMTRACED_OPTIONS_FILE_H
#define MEMTRACED_OPTIONS_FILE_H

#include <stddef.h>

struct options_words {
	char **w;     /* n words, then NULL */
	int n;
	char *buf;    /* the words point into it */
};

/* The options FILE holds, in its order. 0, or -1 with a message naming the file and line. */
int options_file_read(const char *path, struct options_words *out, char *err, size_t errlen);
void options_words_free(struct options_words *w);

#endif
