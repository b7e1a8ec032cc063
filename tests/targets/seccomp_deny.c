/* Runs a command under a seccomp filter that fails the named system calls with EPERM, as
 * systemd's SystemCallFilter=~... with SystemCallErrorNumber=EPERM does (tests/test_fleet.sh
 * runs memtraced so, the names being what `systemd-analyze syscall-filter` lists for the
 * unit's groups).
 *
 *   seccomp_deny NAME... -- CMD [ARG...]
 *
 * Names this libseccomp does not know are skipped (systemd's groups name calls of every
 * architecture). The filter is inherited by CMD and its children, as a unit's is. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int sep = 1;
	while (sep < argc && strcmp(argv[sep], "--") != 0) sep++;
	if (sep >= argc - 1) {
		fprintf(stderr, "usage: seccomp_deny NAME... -- CMD [ARG...]\n");
		return 2;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) return 2;
	int denied = 0;
	for (int i = 1; i < sep; i++) {
		int nr = seccomp_syscall_resolve_name(argv[i]);
		if (nr == __NR_SCMP_ERROR) continue;
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) == 0) denied++;
	}
	if (seccomp_load(ctx) < 0) {
		perror("seccomp_load");
		return 2;
	}
	fprintf(stderr, "seccomp_deny: %d system calls fail with EPERM\n", denied);
	execvp(argv[sep + 1], argv + sep + 1);
	perror(argv[sep + 1]);
	return 127;
}
