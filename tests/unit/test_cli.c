/* Unit tests of memtraced's command line (user/daemon/core/options/cli.c). */
#include "check.h"
#include "options/cli.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static enum cli_result parse(struct cli_opts *o, char *err, int argc, char **argv)
{
	err[0] = '\0';
	return cli_parse(argc, argv, o, err, 256);
}

#define ARGV(...) ((char *[]){"memtraced", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"memtraced", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, err, ...) parse(o, err, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

/* --options-file: the service's environment file, its options first */
static void options_file_checks(void)
{
	struct cli_opts o;
	char err[256], path[] = "/tmp/memtraced-opts-XXXXXX";
	int fd = mkstemp(path);
	const char *text = "# memtraced.service's options\n"
			   "MEMTRACED_SELECT=\"--match redis-server --match 'nginx'\"\n\n"
			   "  MEMTRACED_LISTEN=127.0.0.1:9464\n"
			   "OTHER=ignored --rate 1\n"
			   "MEMTRACED_OPTS='--rate 1e-4 --max-processes 8'\n";
	CHECK("options_file_written", fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	if (fd >= 0) close(fd);
	enum cli_result r = PARSE(&o, err, "--options-file", path, "--rate", "1e-3");
	CHECKF("options_file_read", r == CLI_OK && o.select.nmatch == 2 &&
	       strcmp(o.select.match[0], "redis-server") == 0 && strcmp(o.select.match[1], "'nginx'") == 0 &&
	       o.listen && strcmp(o.listen, "127.0.0.1:9464") == 0 && o.select.max_processes == 8 &&
	       o.rate == 1e-3 && strcmp(o.options_file, path) == 0, "%s", err);
	cli_free(&o);
	chmod(path, 0666);
	CHECKF("options_file_writable_by_others", PARSE(&o, err, "--options-file", path) == CLI_ERROR &&
	       strstr(err, "writable by others"), "%s", err);
	cli_free(&o);
	chmod(path, 0600);
	fd = open(path, O_WRONLY | O_APPEND);
	CHECK("options_file_appended", fd >= 0 && write(fd, "MEMTRACED_OPTS=\"--rate\n", 24) == 24);
	if (fd >= 0) close(fd);
	CHECKF("options_file_unclosed_quote", PARSE(&o, err, "--options-file", path) == CLI_ERROR &&
	       strstr(err, "no closing quote"), "%s", err);
	cli_free(&o);
	/* a link to a root file is not followed (issue 46: /etc/shadow was parsed) */
	char lnk[] = "/tmp/memtraced-optlink-XXXXXX";
	int lfd = mkstemp(lnk);
	if (lfd >= 0) close(lfd);
	unlink(lnk);
	CHECK("options_file_link_made", symlink(path, lnk) == 0);
	CHECKF("options_file_symlink_refused", PARSE(&o, err, "--options-file", lnk) == CLI_ERROR &&
	       strstr(err, "symbolic link"), "%s", err);
	cli_free(&o);
	unlink(lnk);
	/* a directory others may write (not sticky): refused */
	char dir[] = "/tmp/memtraced-optdir-XXXXXX", inner[64];
	CHECK("options_file_dir_made", mkdtemp(dir) != NULL);
	snprintf(inner, sizeof inner, "%s/options", dir);
	CHECK("options_file_inner", link(path, inner) == 0 && chmod(dir, 0777) == 0);
	CHECKF("options_file_dir_writable_refused", PARSE(&o, err, "--options-file", inner) == CLI_ERROR &&
	       strstr(err, "directory others"), "%s", err);
	cli_free(&o);
	unlink(inner);
	rmdir(dir);
	unlink(path);
	CHECKF("options_file_missing", PARSE(&o, err, "--options-file", path) == CLI_ERROR &&
	       strstr(err, "No such file"), "%s", err);
	cli_free(&o);
}

int main(void)
{
	struct cli_opts o;
	char err[256];

	CHECK("pid_defaults", PARSE(&o, err, "-p", "123") == CLI_OK && o.pid == 123 && !o.cmd &&
				      o.rate == CLI_DEFAULT_RATE && o.duration == 0 && !o.output &&
				      o.stack_bytes == CLI_DEFAULT_STACK_BYTES && !o.probe_floor);
	CHECK("long_options", PARSE(&o, err, "--pid", "5", "--output", "x.ctf", "--rate", "1", "--duration",
				    "2.5", "--stack-bytes", "4096", "--probe-floor") == CLI_OK &&
				      o.pid == 5 && strcmp(o.output, "x.ctf") == 0 && o.rate == 1 &&
				      o.duration == 2.5 && o.stack_bytes == 4096 && o.probe_floor);
	CHECK("command_after_dashes", PARSE(&o, err, "-r", "1e-3", "--", "ls", "-l") == CLI_OK &&
					     o.cmd && strcmp(o.cmd[0], "ls") == 0 &&
					     strcmp(o.cmd[1], "-l") == 0 && !o.cmd[2] && o.pid == 0);
	CHECK("command_options_left_alone", PARSE(&o, err, "ls", "-p", "3") == CLI_OK && o.cmd &&
						   strcmp(o.cmd[1], "-p") == 0 && o.pid == 0);
	CHECK("rate_zero", PARSE(&o, err, "-p", "1", "--rate", "0") == CLI_ERROR && strstr(err, "rate"));
	CHECK("rate_above_one", PARSE(&o, err, "-p", "1", "--rate", "1.5") == CLI_ERROR);
	CHECK("rate_nan", PARSE(&o, err, "-p", "1", "--rate", "nan") == CLI_ERROR);
	CHECK("rate_trailing", PARSE(&o, err, "-p", "1", "--rate", "1e-3x") == CLI_ERROR);
	CHECK("duration_negative", PARSE(&o, err, "-p", "1", "-d", "-1") == CLI_ERROR && strstr(err, "duration"));
	CHECK("pid_zero", PARSE(&o, err, "-p", "0") == CLI_ERROR && strstr(err, "PID"));
	CHECK("pid_huge", PARSE(&o, err, "-p", "99999999999") == CLI_ERROR);
	CHECK("stack_bytes_range", PARSE(&o, err, "-p", "1", "--stack-bytes", "100") == CLI_ERROR &&
					   PARSE(&o, err, "-p", "1", "--stack-bytes", "1048577") == CLI_ERROR &&
					   PARSE(&o, err, "-p", "1", "--stack-bytes", "70000") == CLI_OK);
	CHECK("empty_output", PARSE(&o, err, "-p", "1", "-o", "") == CLI_ERROR);
	CHECK("nothing", parse(&o, err, 1, (char *[]){"memtraced", NULL}) == CLI_ERROR &&
				 strstr(err, "nothing to trace"));
	CHECK("both", PARSE(&o, err, "-p", "1", "--", "true") == CLI_ERROR && strstr(err, "not both"));
	CHECK("unknown", PARSE(&o, err, "--bogus") == CLI_ERROR && strstr(err, "--bogus"));
	CHECK("missing_value", PARSE(&o, err, "-p") == CLI_ERROR && strstr(err, "needs a value"));
	/* service mode (engineer SERVICE) */
	char path[64];
	CHECK("several_pids", PARSE(&o, err, "-p", "5", "-p", "7", "-o", "t-%p.ctf") == CLI_OK &&
				      o.npids == 2 && o.pids[0] == 5 && o.pids[1] == 7 && o.pid == 5 &&
				      cli_output_path(&o, 7, path, sizeof path) == 0 &&
				      strcmp(path, "t-7.ctf") == 0);
	CHECK("several_pids_need_percent_p", PARSE(&o, err, "-p", "5", "-p", "7", "-o", "t.ctf") == CLI_ERROR &&
						     strstr(err, "%p"));
	CHECK("output_path_default_and_escape",
	      PARSE(&o, err, "-p", "5") == CLI_OK && cli_output_path(&o, 5, path, sizeof path) == 0 &&
		      strcmp(path, "memtrace-5.ctf") == 0 && PARSE(&o, err, "-p", "5", "-o", "a%%p%p%") == CLI_OK &&
		      cli_output_path(&o, 5, path, sizeof path) == 0 && strcmp(path, "a%p5%") == 0 &&
		      cli_output_path(&o, 5, path, 3) < 0);
	CHECK("snapshot_options", PARSE(&o, err, "-p", "1", "-o", "none", "--snapshot-dir", "d",
					"--snapshot-interval", "0.5", "--snapshot-keep", "3", "--file-mode",
					"0640") == CLI_OK &&
					  o.no_trace && strcmp(o.snapshot_dir, "d") == 0 &&
					  o.snapshot_interval == 0.5 && o.snapshot_keep == 3 && o.file_mode == 0640);
	CHECK("file_mode_default", PARSE(&o, err, "-p", "1") == CLI_OK && o.file_mode == 0600 && !o.no_trace);
	CHECK("file_mode_bad", PARSE(&o, err, "-p", "1", "--file-mode", "rw") == CLI_ERROR &&
				       PARSE(&o, err, "-p", "1", "--file-mode", "1777") == CLI_ERROR);
	CHECK("interval_needs_dir", PARSE(&o, err, "-p", "1", "--snapshot-interval", "1") == CLI_ERROR &&
					    strstr(err, "--snapshot-dir"));
	CHECK("none_needs_dir", PARSE(&o, err, "-p", "1", "-o", "none") == CLI_ERROR);
	CHECK("pid_twice", PARSE(&o, err, "-p", "1", "-p", "1") == CLI_ERROR && strstr(err, "twice"));
	CHECKF("pids_in_one_list_say_how", PARSE(&o, err, "-p", "111", "222") == CLI_ERROR &&
	       strstr(err, "-p 111 -p 222"), "%s", err);
	CHECK("ring_size", PARSE(&o, err, "--ring-size", "1048576", "-p", "1") == CLI_OK &&
	      o.ring_bytes == 1048576);
	CHECK("ring_size_not_pow2", PARSE(&o, err, "--ring-size", "100000", "-p", "1") == CLI_ERROR &&
	      strstr(err, "power of two"));
	CHECK("hold_exec", PARSE(&o, err, "--hold-exec", "-p", "1") == CLI_OK && o.hold_exec);
	/* the default of -p and -- CMD is the sampler (issue 34); MEMTRACED_INJECT=off: uprobes */
	const char *env = getenv("MEMTRACED_INJECT");
	char saved[64] = "";
	if (env) snprintf(saved, sizeof saved, "%s", env);
	unsetenv("MEMTRACED_INJECT");
	CHECK("inject_default_pid_auto", PARSE(&o, err, "-p", "1") == CLI_OK &&
	      o.inject == CLI_INJECT_AUTO && o.inject_default && !o.no_carried);
	CHECK("inject_default_cmd_auto", PARSE(&o, err, "--", "/bin/true") == CLI_OK &&
	      o.inject == CLI_INJECT_AUTO && o.inject_default);
	CHECK("inject_explicit_not_default", PARSE(&o, err, "--inject", "-p", "1") == CLI_OK &&
	      o.inject == CLI_INJECT_AUTO && !o.inject_default);
	CHECK("inject_default_not_match", PARSE(&o, err, "--match", "x", "-o", "t-%p.ctf") == CLI_OK &&
	      o.inject == CLI_INJECT_NO);
	CHECK("inject_default_not_floor", PARSE(&o, err, "--probe-floor", "-p", "1") == CLI_OK &&
	      o.inject == CLI_INJECT_NO);
	setenv("MEMTRACED_INJECT", "off", 1);
	CHECK("inject_default_env_off", PARSE(&o, err, "-p", "1") == CLI_OK && o.inject == CLI_INJECT_NO &&
	      !o.no_carried && !o.inject_default);
	if (saved[0]) setenv("MEMTRACED_INJECT", saved, 1);
	else unsetenv("MEMTRACED_INJECT");
	CHECK("inject_auto", PARSE(&o, err, "--inject", "-p", "1") == CLI_OK && o.inject == CLI_INJECT_AUTO);
	CHECK("inject_required", PARSE(&o, err, "--inject=required", "-p", "1") == CLI_OK &&
	      o.inject == CLI_INJECT_REQUIRED);
	CHECK("inject_no", PARSE(&o, err, "--inject=no", "-p", "1") == CLI_OK && o.inject == CLI_INJECT_NO &&
	      o.no_carried);
	CHECKF("inject_bad_value", PARSE(&o, err, "--inject=maybe", "-p", "1") == CLI_ERROR &&
	       strstr(err, "--inject=required"), "%s", err);
	CHECK("format_default_v2", PARSE(&o, err, "-p", "1") == CLI_OK && o.format_version == 0);
	CHECK("format_v3", PARSE(&o, err, "--format", "v3", "-p", "1") == CLI_OK && o.format_version == 3);
	CHECKF("format_bad", PARSE(&o, err, "--format", "v4", "-p", "1") == CLI_ERROR &&
	       strstr(err, "v2"), "%s", err);
	CHECK("inject_not_with_floor", PARSE(&o, err, "--inject", "--probe-floor", "-p", "1") == CLI_ERROR);
	options_file_checks();
	return CHECK_DONE();
}
