/* The parser driven through its protocol by this test as the daemon (core/parser/parser.h):
 * well-formed requests are answered (an object's facts, allocator discovery, a process's
 * unwinder), and a malformed one (too short, too long, of no known type, a stack longer than
 * the message) ends the parser, which the daemon's side then reports, never reads past.
 * Each malformed case runs in a child of its own with a parser of its own. Root only (the
 * parser confines itself as nobody). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "with_parser.h"
#include "parser/rstacks.h"
#include "parser/protocol_check.h"
#include "protocol/protocol.h"

static char self[4096];

static void well_formed(void)
{
	struct elf_facts f;
	char err[512] = "";
	int rc = pfacts_of(getpid(), self, "main", &f, err, sizeof err);
	int fd = open(self, O_RDONLY | O_CLOEXEC);
	CHECKF("parser_facts_answered", rc == 0 && f.elf_x86_64 && f.has_interp && f.sym_found &&
	       elf_offset_is_code(fd, f.sym_offset), "rc %d x86 %d interp %d found %d: %s", rc,
	       f.elf_x86_64, f.has_interp, f.sym_found, err);
	close(fd);
	rc = pfacts_of(getpid(), "/etc/hostname", NULL, &f, err, sizeof err);
	CHECKF("parser_facts_of_no_elf_is_an_error", rc != 0 && !f.elf_x86_64, "rc %d", rc);
	struct alloc_sites *s = calloc(1, sizeof *s);
	rc = psites_for_pid(getpid(), s, err, sizeof err);
	/* glibc's, or AddressSanitizer's under SANITIZE=1 */
	CHECKF("parser_sites_answered", rc == 0 && s->n > 0 && s->allocator[0],
	       "rc %d n %d allocator '%s': %s", rc, s->n, s->allocator, err);
	free(s);
	struct rstacks *r = rstacks_open(getpid(), err, sizeof err);
	CHECKF("parser_unwinder_opened", r != NULL, "%s", err);
	rstacks_close(r);
	CHECK("parser_still_running", parser_gone() == NULL);
}

/* In a child: a parser of its own gets one malformed message; exits 0 when the daemon's side
 * saw it end ("exited with status 3") and answered nothing. */
static int malformed_child(int argc, char **argv, uint32_t type, uint32_t len)
{
	with_parser(argc, argv);
	char err[512];
	struct pchan *c = pchan_open(err, sizeof err);
	if (!c) return 10;
	uint8_t *junk = calloc(1, len + 1);
	if (len >= sizeof(struct pq_unwind) && type == PQ_UNWIND)
		((struct pq_unwind *)junk)->stack_len = len; /* more stack than the message holds */
	if (pchan_send(c, type, junk, len, NULL, 0) < 0) return 11;
	uint8_t reply[4096];
	size_t got;
	int t = pchan_recv(c, reply, sizeof reply, &got, 1);
	const char *why = parser_gone();
	printf("# type %u len %u: reply %d, parser %s\n", type, len, t, why ? why : "running");
	free(junk);
	fflush(stdout);
	return t < 0 && c->broken && why && strstr(why, "exited with status 3") ? 0 : 12;
}

static void malformed(int argc, char **argv)
{
	static const struct { const char *name; uint32_t type, len; } cases[] = {
		{"short_facts", PQ_FACTS, 3},
		{"long_sites", PQ_SITES_PID, sizeof(struct pq_sites) + 8},
		{"unknown_type", 999, 16},
		{"stack_past_message", PQ_UNWIND, sizeof(struct pq_unwind)},
		{"short_final_maps", PQ_FINAL_MAPS, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) _exit(malformed_child(argc, argv, cases[i].type, cases[i].len));
		int st = -1;
		waitpid(pid, &st, 0);
		char name[96];
		snprintf(name, sizeof name, "parser_malformed_%s_ends_it", cases[i].name);
		CHECKF(name, WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
	}
}

int main(int argc, char **argv)
{
	if (geteuid() != 0) {
		const char *ci = getenv("CI");
		bool in_ci = ci && !strcmp(ci, "true");
		printf("%s parser_protocol: needs root (the parser becomes nobody)\n", in_ci ? "FAIL" : "SKIP");
		return in_ci;
	}
	if (argc == 3 && strcmp(argv[1], PARSER_ARG) == 0) with_parser(argc, argv); /* the parser */
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = '\0';
	malformed(argc, argv); /* before this process has a parser: each child starts its own */
	with_parser(argc, argv);
	well_formed();
	return CHECK_DONE();
}
