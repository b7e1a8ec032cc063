/* An object's facts asked of the parser (parser.h): the daemon's --inject and dlopen watch
 * need to know where a function is in a target's file, or whether it is code we can call
 * into, without parsing that file themselves. The answer comes from a process a hostile file
 * may have taken over: it is normalized here, and an offset is only used to place a uprobe
 * after the caller checked it against the file (tracer/uprobe_link.h). */
#include "parser.h"
#include "protocol/protocol.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pfacts_of(pid_t pid, const char *path, const char *symbol, struct elf_facts *f,
	      char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	struct pq_facts *q = calloc(1, sizeof *q);
	struct pr_facts *r = calloc(1, sizeof *r);
	int rc = -1;
	if (!q || !r) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (strlen(path) >= sizeof q->path || (symbol && strlen(symbol) >= sizeof q->symbol)) {
		snprintf(err, errlen, "%s: path or symbol name too long", path);
		goto out;
	}
	parser_allow_pid(pid);
	q->pid = pid;
	snprintf(q->path, sizeof q->path, "%s", path);
	snprintf(q->symbol, sizeof q->symbol, "%s", symbol ? symbol : "");
	if (parser_rpc(PQ_FACTS, q, sizeof *q, PR_FACTS, r, sizeof *r, err, errlen) < 0) goto out;
	r->err[sizeof r->err - 1] = '\0';
	if (r->rc != 0) {
		snprintf(err, errlen, "%s", r->err[0] ? r->err : "not an ELF object");
		goto out;
	}
	/* a bool the parser wrote may hold any byte: only 0 and 1 leave here */
	const volatile uint8_t *b = (const volatile uint8_t *)&r->facts;
	f->elf_x86_64 = b[offsetof(struct elf_facts, elf_x86_64)] == 1;
	f->has_interp = b[offsetof(struct elf_facts, has_interp)] == 1;
	f->has_otel_usdt = b[offsetof(struct elf_facts, has_otel_usdt)] == 1;
	f->sym_found = b[offsetof(struct elf_facts, sym_found)] == 1;
	f->sym_value = f->sym_found ? r->facts.sym_value : 0;
	f->sym_offset = f->sym_found ? r->facts.sym_offset : 0;
	rc = 0;
out:
	free(q);
	free(r);
	return rc;
}
