# memtraced build. `make` builds everything into build/; `make test` runs the test suite;
# `make deps` installs the Debian packages the build, tests and benchmarks need.
#
# Layout (sources are picked up by pattern, so adding a file needs no Makefile change):
#   user/format/*.c   -> build/libmemtrace.a   the memtrace format library (pure C, no BPF)
#   user/tools/X.c    -> build/bin/X           trace tools (link libmemtrace.a only)
#   user/daemon/core/ROOM/*.c (+ shared/)
#                     -> build/bin/memtraced   the privileged tracer (core/entry/main.c has main())
#   user/daemon/parse/*.c and parse/ROOM/*.c (+ shared/)
#                     -> build/bin/memtraced-parse  the unprivileged parser it starts
#                                              (parse/main.c); each side sees only its own
#                                              rooms and shared/ (-I), so neither can include
#                                              the other's headers. Both, less the two mains,
#                                              are build/libmemtraced.a, linked by unit tests;
#                                              includes name the room: "sites/allocsyms.h"
#   bpf/X.bpf.c       -> build/bpf/X.bpf.o + build/include/X.skel.h
#   tests/unit/test_X.c   -> build/tests/unit/test_X
#   tests/targets/X.c     -> build/tests/targets/X   (test workloads: -O2, no frame pointers)
#   tests/fuzz/fuzz_X.c   -> build/fuzz/fuzz_X      (libFuzzer, `make fuzz`)
#   user/sampler/*.c  -> build/lib/libmemtraced_sampler.so   the in-process sampler that
#                                              `memtraced --inject` loads (libc only)
#                         -> build/tests/fuzz/replay_X (replays tests/fuzz/regressions/X/)

PREFIX   ?= /usr/local
SYSCONFDIR ?= /etc
BUILD    ?= build
CC       ?= cc
CLANG    ?= clang
BPFTOOL  ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
ARCH     := x86
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

WARN     := -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -Iuser/format -I$(BUILD)/include -I$(BUILD)/gen
LDLIBS_FMT    := -lprotobuf-c -lz -lm
LDLIBS_DAEMON := -lprotobuf-c -lmicrohttpd -lbpf -ldw -lelf -liberty -lcapstone -lseccomp -ldebuginfod -lz -lm -lpthread
LDLIBS_CORE   := -lprotobuf-c -lbpf -lelf -lseccomp -ldebuginfod -lz -lm -lpthread
LDLIBS_PARSE  := -lmicrohttpd -ldw -lelf -liberty -lcapstone -lseccomp -lz -lm -lpthread

ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
BUILD   := build-san
endif

FMT_SRCS    := $(wildcard user/format/*.c)
FMT_OBJS    := $(FMT_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/profile.pb-c.o
TOOL_SRCS   := $(wildcard user/tools/*.c)
TOOLS       := $(TOOL_SRCS:user/tools/%.c=$(BUILD)/bin/%)
CORE_SRCS   := $(filter-out user/daemon/core/entry/main.c,$(wildcard user/daemon/core/*.c user/daemon/core/*/*.c))
PARSE_SRCS  := $(filter-out user/daemon/parse/main.c,$(wildcard user/daemon/parse/*.c user/daemon/parse/*/*.c))
SHARED_SRCS := $(wildcard user/daemon/shared/*/*.c)
DAEMON_SRCS := $(CORE_SRCS) $(PARSE_SRCS) $(SHARED_SRCS)
DAEMON_OBJS := $(DAEMON_SRCS:%.c=$(BUILD)/obj/%.o)
DAEMON_HDRS := $(wildcard user/daemon/*/*.h user/daemon/*/*/*.h)
# What a daemon source may include: its own side's rooms and shared/; tests see all.
DAEMON_INC   = -Iuser/daemon/core -Iuser/daemon/parse -Iuser/daemon/shared
side_inc     = $(if $(findstring daemon/core/,$(1)),-Iuser/daemon/core -Iuser/daemon/shared,$\
               $(if $(findstring daemon/parse/,$(1)),-Iuser/daemon/parse -Iuser/daemon/shared,$\
               $(if $(findstring daemon/shared/,$(1)),-Iuser/daemon/shared,$(DAEMON_INC))))
BPF_SRCS    := $(wildcard bpf/*.bpf.c)
BPF_OBJS    := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.bpf.o)
SKELS       := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/include/%.skel.h)
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
UNITS       := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
TARGET_SRCS := $(wildcard tests/targets/*.c)
TARGETS     := $(TARGET_SRCS:tests/targets/%.c=$(BUILD)/tests/targets/%)
FUZZ_SRCS   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZERS     := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
HAVE_DAEMON := $(wildcard user/daemon/core/entry/main.c)
MEMTRACED   := $(if $(HAVE_DAEMON),$(BUILD)/bin/memtraced $(BUILD)/bin/memtraced-parse)

.PHONY: all test fuzz bench demo deps install clean
# Keep intermediate files (BPF objects, skeletons, objects): no rebuild on every make.
.SECONDARY:
all: $(BUILD)/libmemtrace.a $(TOOLS) $(MEMTRACED) $(UNITS) $(TARGETS)

$(BUILD)/obj/%.o: %.c $(SKELS) $(wildcard include/*.h user/format/*.h user/tools/*.h) $(DAEMON_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(call side_inc,$<) -c $< -o $@

$(BUILD)/libmemtrace.a: $(FMT_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libmemtraced.a: $(DAEMON_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/%: $(BUILD)/obj/user/tools/%.o $(BUILD)/libmemtrace.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_FMT)

# The two programs link their own side's objects and shared/ only (tests/test_layout.sh).
$(BUILD)/bin/memtraced: $(BUILD)/obj/user/daemon/core/entry/main.o $(CORE_SRCS:%.c=$(BUILD)/obj/%.o) $(SHARED_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/libmemtrace.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_CORE)
$(BUILD)/bin/memtraced-parse: $(BUILD)/obj/user/daemon/parse/main.o $(PARSE_SRCS:%.c=$(BUILD)/obj/%.o) $(SHARED_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/libmemtrace.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_PARSE)

# BPF objects: CO-RE against the vmlinux.h in vmlinux/, then a libbpf skeleton.
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard include/*.h bpf/*.h) vmlinux/vmlinux.h
	@mkdir -p $(dir $@)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Iinclude -idirafter /usr/include/$(MULTIARCH) -c $< -o $@

$(BUILD)/include/%.skel.h: $(BUILD)/bpf/%.bpf.o
	@mkdir -p $(dir $@)
	$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

$(BUILD)/tests/unit/%: tests/unit/%.c $(BUILD)/libmemtraced.a $(BUILD)/libmemtrace.a $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DAEMON_INC) -Itests/unit $(LDFLAGS) $< $(BUILD)/libmemtraced.a $(BUILD)/libmemtrace.a -o $@ $(LDLIBS_DAEMON)

# Test workloads are built like a typical distro binary: -O2, no frame pointers, with DWARF.
$(BUILD)/tests/targets/%: tests/targets/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -pthread $< -o $@ -ldl

# the unit's SystemCallFilter, applied as systemd does (tests/test_fleet.sh)
$(BUILD)/tests/targets/seccomp_deny: tests/targets/seccomp_deny.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g $< -o $@ -lseccomp

# allocsyms workloads: attach_nopie and attach_static are linked -no-pie and -static.
$(BUILD)/tests/targets/attach_pie $(BUILD)/tests/targets/attach_interpose: tests/targets/attach_report.h
$(BUILD)/tests/targets/inject_nopie: tests/targets/inject_nopie.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -no-pie -fno-pie $< -o $@
$(BUILD)/tests/targets/attach_nopie $(BUILD)/tests/targets/attach_static: $(BUILD)/tests/targets/attach_%: tests/targets/attach_%.c tests/targets/attach_report.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -pthread $(if $(findstring static,$*),-static,-no-pie) $< -o $@ -ldl

# C++ test workloads (tests/targets/X.cc), built the same way.
CXX_TARGETS := $(patsubst tests/targets/%.cc,$(BUILD)/tests/targets/%,$(wildcard tests/targets/*.cc))
all: $(CXX_TARGETS)
$(BUILD)/tests/targets/%: tests/targets/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fomit-frame-pointer -pthread $< -o $@ -ldl

# Rust test workloads (tests/targets/X/, a cargo crate -> build/tests/targets/X): release builds
# (their Cargo.toml sets debug = 1) by Debian's cargo and rustc, never a rustup toolchain found
# on PATH; offline, with a CARGO_HOME of their own so no user configuration or registry counts.
RUST_TARGETS := $(patsubst tests/targets/%/Cargo.toml,$(BUILD)/tests/targets/%,$(wildcard tests/targets/*/Cargo.toml))
all: $(RUST_TARGETS)
$(BUILD)/tests/targets/%: tests/targets/%/Cargo.toml tests/targets/%/Cargo.lock tests/targets/%/src/main.rs
	@mkdir -p $(dir $@) $(BUILD)/cargo
	RUSTC=/usr/bin/rustc RUSTFLAGS= CARGO_HOME=$(abspath $(BUILD))/cargo/home /usr/bin/cargo build \
		--quiet --offline --locked --release --manifest-path $< --target-dir $(abspath $(BUILD))/cargo/$*
	cp $(BUILD)/cargo/$*/release/$* $@

# Allocator workloads (tests/test_allocators.sh): jemalloc compiled into the executable
# (libjemalloc.a), and a -static program (glibc's malloc and libstdc++'s operator new inside).
ALLOC_VARIANTS := $(BUILD)/tests/targets/alloc_workload_jemalloc_in $(BUILD)/tests/targets/alloc_workload_static \
                  $(BUILD)/tests/targets/alloc_workload_jemalloc_dyn
all: $(ALLOC_VARIANTS)
$(BUILD)/tests/targets/alloc_workload_jemalloc_in: tests/targets/alloc_workload.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fomit-frame-pointer -pthread -DLINKED_JEMALLOC $< -o $@ -Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -ldl -lm
# jemalloc as a shared library the program links (its *allocx calls go through the GOT).
$(BUILD)/tests/targets/alloc_workload_jemalloc_dyn: tests/targets/alloc_workload.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fomit-frame-pointer -pthread -DLINKED_JEMALLOC $< -o $@ -ljemalloc -ldl -lm
$(BUILD)/tests/targets/alloc_workload_static: tests/targets/alloc_workload.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fomit-frame-pointer -pthread -static $< -o $@ -ldl

# libFuzzer targets: tests/fuzz/fuzz_X.c with the format library and the daemon's sources, all
# compiled with the fuzzer's coverage and ASan/UBSan into BUILD/fuzz/obj (the system libraries,
# libelf, libdw, capstone, are not instrumented). The linker takes only the objects a target uses.
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
               -std=gnu11 -D_GNU_SOURCE -Iinclude -Iuser/format -I$(BUILD)/include -I$(BUILD)/gen
$(BUILD)/fuzz/obj/%.o: %.c $(SKELS) $(wildcard include/*.h user/format/*.h) $(DAEMON_HDRS)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) $(call side_inc,$<) -c $< -o $@
$(BUILD)/fuzz/libfuzzed.a: $(FMT_SRCS:%.c=$(BUILD)/fuzz/obj/%.o) $(DAEMON_SRCS:%.c=$(BUILD)/fuzz/obj/%.o)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/fuzz/libfuzzed.a $(wildcard tests/fuzz/*.c)
	$(CLANG) $(FUZZ_CFLAGS) $(DAEMON_INC) -fsanitize=fuzzer $< $(BUILD)/fuzz/libfuzzed.a -o $@ $(LDLIBS_DAEMON)

# The same targets without libFuzzer (tests/fuzz/replay_main.c): tests/test_fuzz_replay.sh
# replays the kept findings (tests/fuzz/regressions/X/) with them in every test run.
REPLAYS := $(FUZZ_SRCS:tests/fuzz/fuzz_%.c=$(BUILD)/tests/fuzz/replay_%)
all: $(REPLAYS)
$(BUILD)/tests/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(wildcard tests/fuzz/*.c) $(BUILD)/libmemtraced.a $(BUILD)/libmemtrace.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DAEMON_INC) $(LDFLAGS) $< tests/fuzz/replay_main.c $(BUILD)/libmemtraced.a $(BUILD)/libmemtrace.a -o $@ $(LDLIBS_DAEMON)

test: deps all
	bash tests/run.sh $(BUILD)

FUZZ_SECONDS ?= 600
fuzz: deps all $(FUZZERS)
	bash tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

bench: DEPS += $(DEPS_BENCH)
bench: deps all
	bash bench/run.sh $(BUILD)

# The demo builds and installs only what tracing the bundled workload needs.
DEMO_BINS := $(MEMTRACED) $(BUILD)/bin/memtrace-report $(BUILD)/bin/memtrace-dump \
             $(BUILD)/bin/memtrace-diff $(BUILD)/bin/memtrace-html $(BUILD)/tests/targets/demo_server \
             $(BUILD)/lib/libmemtraced_sampler.so
demo: DEPS = $(DEPS_TRACER)
demo: deps
	$(MAKE) $(DEMO_BINS)
	bash tests/demo.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(TOOLS) $(MEMTRACED) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(wildcard docs/man/*.1) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/lib  # memtraced --inject looks in ../lib next to itself
	install -m 0644 $(SAMPLER_LIB) $(DESTDIR)$(PREFIX)/lib/
	# the host service (docs/fleet.md): its unit, and its options unless they are there already
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(SYSCONFDIR)/default
	sed 's|@BINDIR@|$(PREFIX)/bin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' docs/fleet/memtraced.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/memtraced.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/memtraced.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/default/memtraced ] || install -m 0644 docs/fleet/memtraced.env $(DESTDIR)$(SYSCONFDIR)/default/memtraced

clean:
	rm -rf build build-san

# Debian packages, installed by the target that needs them (only the missing ones, so `make test`
# on a ready machine does not touch apt):
#   DEPS_TRACER  build and run memtraced and the trace tools the demo uses (`make demo`)
#   DEPS_TEST    everything else `make` builds (C++ and allocator workloads,
#                Rust workloads, sanitizers, fuzzing) and what the tests run against (chromium,
#                go tool pprof, node, tmux, the alternative allocators, gdb, prometheus, nginx, redis and
#                PostgreSQL (its server and pgbench),
#                qemu and an initramfs's tools for the kernel matrix: tests/test_kernels.sh)
#   DEPS_BENCH   the tools the benchmarks compare with (bcc's memleak, heaptrack, redis), perf (the pipeline's stages)
DEPS_TRACER := make gcc clang llvm libbpf-dev bpftool libelf-dev libdw-dev libcapstone-dev \
               zlib1g-dev pkg-config binutils libiberty-dev libc6-dbg libseccomp-dev \
               libdebuginfod-dev libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler
DEPS_TEST   := g++ procps python3 python3.11 debuginfod gdb cargo rustc libclang-rt-14-dev chromium \
               golang-go nodejs tmux libjemalloc2 libjemalloc-dev libtcmalloc-minimal4 \
               libmimalloc2.0 python3-prometheus-client util-linux curl prometheus systemd \
               qemu-system-x86 busybox-static cpio kmod nginx redis-server redis-tools postgresql-15 \
               libcap2-bin
DEPS_BENCH  := bpfcc-tools python3-bpfcc linux-headers-amd64 heaptrack redis-server redis-tools linux-perf \
               time util-linux
DEPS := $(DEPS_TRACER) $(DEPS_TEST)
deps:
	@missing=$$(for p in $(DEPS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing missing Debian packages:" $$missing; \
		[ "$$(id -u)" = 0 ] || { echo "make deps: need root to install:" $$missing >&2; exit 1; }; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi

# pprof profiles: protobuf-c code generated from pprof's schema (user/tools/profile.proto).
$(BUILD)/gen/profile.pb-c.c $(BUILD)/gen/profile.pb-c.h &: user/tools/profile.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=user/tools --c_out=$(BUILD)/gen $<
# The format library's pprof writer (user/format/pprof_build.c) is built on it; memtrace-pprof
# and memtraced's /debug/pprof/heap use that.
$(BUILD)/obj/user/format/pprof_build.o $(BUILD)/fuzz/obj/user/format/pprof_build.o: $(BUILD)/gen/profile.pb-c.h
$(BUILD)/obj/gen/profile.pb-c.o: $(BUILD)/gen/profile.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The injector's test pieces (tests/unit/test_inject.c): a library to place into targets, a
# -static copy of a target (refused: no dynamic linker), and a dynamic program without libc
# (refused: no dlopen to call).
PLUGINS := $(patsubst tests/plugins/%.c,$(BUILD)/tests/plugins/%.so,$(filter-out tests/plugins/sampler_plugin.c,$(wildcard tests/plugins/*.c)))
all: $(PLUGINS) $(BUILD)/tests/targets/inject_block_static
$(BUILD)/tests/plugins/%.so: tests/plugins/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -shared -fPIC -pthread $< -o $@
$(BUILD)/tests/targets/inject_block_static: tests/targets/inject_block.c tests/targets/inject_regs.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -pthread -static $< -o $@
$(BUILD)/tests/targets/inject_block: tests/targets/inject_regs.h
$(BUILD)/tests/targets/inject_nolibc: tests/targets/inject_nolibc.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -nostdlib -fPIE -pie -Wl,--dynamic-linker=/lib64/ld-linux-x86-64.so.2 $< -o $@

# The in-process sampler (user/sampler/sampler.h): a shared library with no dependency but
# libc, never unloaded (-z nodelete). Its own flags: no sanitizer (it is loaded into any
# program), hidden by default (it exports only sampler.h), initial-exec TLS (no allocation on a
# thread's first touch), -z defs (every symbol found in libc at link time).
SAMPLER_SRCS := $(wildcard user/sampler/*.c)
SAMPLER_LIB  := $(BUILD)/lib/libmemtraced_sampler.so
SAMPLER_CFLAGS := -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIC -fvisibility=hidden \
                  -ftls-model=initial-exec -fno-stack-protector -Iinclude
all: $(SAMPLER_LIB)
$(SAMPLER_LIB): $(SAMPLER_SRCS) $(wildcard user/sampler/*.h) include/sampler_check.h include/inject_agent.h
	@mkdir -p $(dir $@)
	$(CC) $(SAMPLER_CFLAGS) -shared -Wl,-z,nodelete -Wl,-z,now -Wl,-z,relro -Wl,-z,defs \
		-Wl,--as-needed $(SAMPLER_SRCS) -o $@

# The plugins test_sampler dlopens after starting the sampler (the leaf is found only through
# the first one's RUNPATH).
$(BUILD)/tests/plugins/libsampler_plugin.so: tests/plugins/sampler_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN' $< -o $@
$(BUILD)/tests/plugins/libsampler_plugin_leaf.so: tests/plugins/sampler_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared $< -o $@
$(BUILD)/tests/unit/test_sampler: $(SAMPLER_LIB) $(BUILD)/tests/plugins/libsampler_plugin.so \
	$(BUILD)/tests/plugins/libsampler_plugin_leaf.so
$(BUILD)/tests/unit/test_sampler: LDLIBS_DAEMON += -lstdc++
$(BUILD)/bench/sampler_cost: $(SAMPLER_LIB)
# A program carrying a sampler of its own: the same sources under another name, linked in.
$(BUILD)/tests/lib/libownsampler.so: $(SAMPLER_SRCS) $(wildcard user/sampler/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(SAMPLER_CFLAGS) -shared -Wl,-z,nodelete -Wl,-z,now -Wl,-z,defs $(SAMPLER_SRCS) -o $@
$(BUILD)/tests/targets/own_sampler: tests/targets/own_sampler.c $(BUILD)/tests/lib/libownsampler.so
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer $< -o $@ -L$(BUILD)/tests/lib -lownsampler \
		-Wl,-rpath,'$$ORIGIN/../lib'


# Benchmark programs: bench/X.c -> build/bench/X (linked like the unit tests).
BENCH_SRCS := $(wildcard bench/*.c)
BENCHES    := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
all: $(BENCHES)
$(BUILD)/bench/%: bench/%.c $(BUILD)/libmemtraced.a $(BUILD)/libmemtrace.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DAEMON_INC) $(LDFLAGS) $< $(BUILD)/libmemtraced.a $(BUILD)/libmemtrace.a -o $@ $(LDLIBS_DAEMON)
