# libcoll: build, test, demo and install.
#
#   make                 libcoll.so, libcoll.a and the tools, into build/
#   make test            every test (installs the Debian packages it needs), a
#                        short run of every fuzzer, the sanitizer suites
#   make fuzz            every fuzzer for FUZZ_SECONDS each (docs/testing.md)
#   make test-sanitize   the whole suite under ASan+UBSan, the threaded tests under TSan
#   make demo            the 4-rank demo job through collrun
#   make install PREFIX=/usr/local
#
# Optional dependencies are detected and reported with one line each; a
# missing one switches its part off and never breaks the build.

PREFIX     ?= /usr/local
CC         ?= gcc
CUDA_HOME  ?= /usr/local/cuda
WERROR     ?= 1
BUILD      ?= build

VERSION := $(shell awk '/define COLL_VERSION_(MAJOR|MINOR|PATCH)/ {v = v sep $$3; sep = "."} END {print v}' libcoll/coll.h)
SOVERSION := $(firstword $(subst ., ,$(VERSION)))

WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes
# Messages are cut to fixed buffers on purpose: truncation is not a bug here.
WARN    += $(shell $(CC) -Werror -Wno-format-truncation -x c -c /dev/null -o /dev/null \
                    2>/dev/null && echo -Wno-format-truncation)
ifeq ($(WERROR),1)
WARN    += -Werror
endif
OPT     ?= -O2 -g
# Sanitizer builds (make test-sanitize, make fuzz) set SAN in their own BUILD dir.
SAN     ?=
CFLAGS  += -std=gnu11 $(OPT) $(WARN) -fPIC -fvisibility=hidden -pthread -D_GNU_SOURCE $(SAN)
CPPFLAGS += -Ilibcoll -Itransports -Ialgorithms
LDLIBS  += -pthread $(SAN)

# The builds that make test, demo, fuzz and test-sanitize start run one
# compiler per CPU unless the caller chose (make -jN): serial, the four builds
# of make test took about 4 minutes of its 20 on 2 cores. MAKEFLAGS holds -j
# only once recipes run, so this is expanded there.
NPROC   := $(shell nproc 2>/dev/null || echo 1)
JOBS     = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

# ---- optional dependencies ---------------------------------------------------
HAVE_CHECK := $(shell pkg-config --exists check 2>/dev/null && echo 1)
HAVE_VERBS := $(shell test -f /usr/include/infiniband/verbs.h && \
                $(CC) -print-file-name=libibverbs.so | grep -q / && echo 1)
HAVE_OFI   := $(shell pkg-config --exists libfabric 2>/dev/null && echo 1)
HAVE_CUDA  := $(shell test -x $(CUDA_HOME)/bin/nvcc && echo 1)

mark = $(if $(1),✓,✗)

# Quiet build lines unless V=1.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @echo "  $(1)	$(2)"
endif

# ---- sources -----------------------------------------------------------------
# The verbs transport's parsers, wire records and registration cache need no
# libibverbs (and are tested everywhere); the transport itself needs it.
VERBS_SRCS := transports/verbs/verbs_hca.c transports/verbs/verbs_wire.c transports/verbs/verbs_mr.c
ifeq ($(HAVE_VERBS),1)
VERBS_SRCS += transports/verbs/verbs_dev.c transports/verbs/verbs_iface.c \
              transports/verbs/verbs_ep.c transports/verbs/verbs_msg.c
CPPFLAGS   += -DCOLL_HAVE_VERBS
LDLIBS     += -libverbs
endif
LIB_SRCS := $(wildcard libcoll/*.c) transports/transport.c \
            $(wildcard transports/self/*.c) $(wildcard transports/shm/*.c) \
            $(wildcard transports/tcp/*.c) $(VERBS_SRCS) \
            $(wildcard algorithms/*.c)
# The libfabric transport, where libfabric-dev is installed.
ifeq ($(HAVE_OFI),1)
LIB_SRCS += $(wildcard transports/ofi/*.c)
CPPFLAGS += -DCOLL_HAVE_OFI $(shell pkg-config --cflags libfabric)
endif
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOOLS    := $(BUILD)/bin/collrun $(BUILD)/bin/collinfo
EXAMPLES := $(BUILD)/bin/exchange
BENCHES  := $(patsubst bench/%.c,$(BUILD)/bin/%,$(wildcard bench/*.c))
# Shared bench code (bench/common/) is linked into every bench, never built alone.
BENCH_COMMON := $(wildcard bench/common/*.c)
# nccl-tests and OSU names: links to coll_perf and p2p_perf, which read argv[0].
COLL_PERF_LINKS := $(addprefix $(BUILD)/bin/,all_reduce_perf all_gather_perf broadcast_perf \
                   reduce_perf reduce_scatter_perf alltoall_perf scatter_perf gather_perf \
                   sendrecv_perf barrier_perf)
P2P_PERF_LINKS  := $(addprefix $(BUILD)/bin/,p2p_latency p2p_bw p2p_bibw)
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_HELPERS := $(BUILD)/tests/helper_rank

SHLIB := $(BUILD)/lib/libcoll.so.$(VERSION)
STLIB := $(BUILD)/lib/libcoll.a

.PHONY: all lib tools config install uninstall test demo clean deps-test deps-demo docs-env
.DEFAULT_GOAL := all

all: config lib tools $(EXAMPLES) $(BENCHES) $(COLL_PERF_LINKS) $(P2P_PERF_LINKS)

config:
	@echo "libcoll $(VERSION): optional dependencies"
	@echo "  $(call mark,$(HAVE_CHECK)) Check (libcheck)     tests (make test installs it)"
	@echo "  $(call mark,$(HAVE_VERBS)) libibverbs           verbs transport (transports/verbs)"
	@echo "  $(call mark,$(HAVE_OFI)) libfabric            libfabric transport (transports/ofi)"
	@echo "  $(call mark,$(HAVE_CUDA)) CUDA toolkit         device buffers (not built yet)"

lib: $(SHLIB) $(STLIB)

tools: $(TOOLS)

# The compile line, kept in the build dir: objects depend on it, so that an
# optional dependency installed after a build (make test installs
# libfabric-dev, say) or another OPT rebuilds them.
FLAGS_STAMP := $(BUILD)/compile-flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CPPFLAGS) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CPPFLAGS) $(CFLAGS)' > $@

.PHONY: FORCE
FORCE:

$(BUILD)/obj/%.o: %.c $(wildcard libcoll/*.h transports/*.h transports/*/*.h algorithms/*.h) \
                  $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(SHLIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libcoll.so.$(SOVERSION) -Wl,--no-undefined -o $@ $^ $(LDLIBS)
	$(Q)ln -sf libcoll.so.$(VERSION) $(BUILD)/lib/libcoll.so.$(SOVERSION)
	$(Q)ln -sf libcoll.so.$(VERSION) $(BUILD)/lib/libcoll.so

$(STLIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

# Tools and tests link the static library: they may use internal headers.
$(BUILD)/bin/%: tools/%.c $(STLIB)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(STLIB) $(LDLIBS)

$(BUILD)/bin/%: bench/%.c $(BENCH_COMMON) $(wildcard bench/common/*.h) $(STLIB)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) -Ibench/common $(CFLAGS) -o $@ $< $(BENCH_COMMON) $(STLIB) $(LDLIBS) -lm

$(COLL_PERF_LINKS): $(BUILD)/bin/coll_perf
	$(Q)ln -sf coll_perf $@

$(P2P_PERF_LINKS): $(BUILD)/bin/p2p_perf
	$(Q)ln -sf p2p_perf $@

$(BUILD)/bin/%: examples/%.c $(STLIB)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(STLIB) $(LDLIBS)

CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

$(BUILD)/tests/test_%: tests/test_%.c tests/harness.c tests/harness.h $(STLIB)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< tests/harness.c $(STLIB) $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/tests/helper_%: tests/helper_%.c $(STLIB)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< $(STLIB) $(LDLIBS)

# ---- test and demo -------------------------------------------------------------
TEST_PKGS := check pkg-config openmpi-bin mpich iproute2 procps nftables ethtool libfabric-dev \
             libopenmpi-dev libmpich-dev libgloo-dev g++
# clang and libFuzzer (a Recommends of clang on Debian 12, hence named); the
# fuzzers are skipped, visibly, where they cannot be installed.
FUZZ_PKGS := clang libclang-rt-14-dev
DEMO_PKGS := gcc make

deps-test:
	@scripts/deps.sh $(TEST_PKGS)
	@scripts/deps.sh $(FUZZ_PKGS) || echo "libcoll: clang/libFuzzer not installed: fuzzers will be skipped"

deps-demo:
	@scripts/deps.sh $(DEMO_PKGS)

# Re-run make after installing so that Check is detected. The plain suite,
# a short run of every fuzzer, then the sanitizer suites (docs/testing.md).
test: deps-test
	@$(MAKE) $(JOBS) --no-print-directory all test-build
	@tests/run.sh $(BUILD)
	@$(MAKE) $(JOBS) --no-print-directory test-rxe RXE_TESTS="test_verbs test_checksum"
	@$(MAKE) $(JOBS) --no-print-directory fuzz-build && \
	    tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_TEST_SECONDS)
	@$(MAKE) $(JOBS) --no-print-directory sanitize-asan
	@$(MAKE) $(JOBS) --no-print-directory sanitize-tsan

.PHONY: test-build test-long test-rxe
# The verbs transport on a real (Soft-RoCE) device: tests/rxe_vm.sh boots a
# QEMU guest with rdma_rxe and runs these programs there, forced to verbs
# (about 35 s for test_verbs, 45 s more for test_p2p on 2 cores). Skipped,
# visibly, where the guest cannot be had.
RXE_PKGS  := qemu-system-x86 busybox-static
RXE_TESTS ?= test_verbs test_p2p
test-rxe: test-build
	@scripts/deps.sh $(RXE_PKGS) || echo "libcoll: qemu/busybox not installed: test-rxe will be skipped"
	@tests/rxe_vm.sh $(BUILD) '$(foreach t,$(RXE_TESTS),COLL_TEST_TRANSPORTS=verbs \
	    COLL_TEST_BUILD=$(BUILD) CK_TIMEOUT_MULTIPLIER=3 $(BUILD)/tests/$(t) &&) true'; \
	    rc=$$?; [ $$rc -eq 77 ] || exit $$rc
test-build: $(TESTS) $(TEST_HELPERS)

# Larger sweeps: every datatype and op also at the large count, itself twice as large.
test-long: deps-test
	@$(MAKE) $(JOBS) --no-print-directory all test-build
	@COLL_TEST_LONG=1 CK_TIMEOUT_MULTIPLIER=10 tests/run.sh $(BUILD)

# The 4-rank all-reduce sweep through collrun, then one line against the
# best of Open MPI, MPICH and Gloo, measured in the same run (if installed).
demo: deps-demo
	@$(MAKE) $(JOBS) --no-print-directory all
	$(BUILD)/bin/collrun -n 4 $(BUILD)/bin/all_reduce_perf -b 16 -e 64M -f 4 -c 1
	@if command -v mpicc.openmpi >/dev/null && command -v mpicc.mpich >/dev/null && \
	    test -f /usr/include/gloo/allreduce.h && command -v g++ >/dev/null; then \
	    echo "Against the peers (same sweep, each library with its defaults on this host, alternating runs; about a minute):"; \
	    bench/compare.sh --build $(BUILD) --transport any --np 4 --reps 1 --verdict; \
	else \
	    echo "verdict skipped: the peers are not installed (make compare installs them)"; \
	fi

# The table of COLL_* variables in docs/env.md, from libcoll/param.h.
docs-env: $(BUILD)/bin/collinfo
	@$(BUILD)/bin/collinfo --markdown > $(BUILD)/params.md
	@awk -v table=$(BUILD)/params.md \
	    '/<!-- params:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next } \
	     /<!-- params:end -->/ { skip = 0 } !skip' docs/env.md > $(BUILD)/env.md
	@mv $(BUILD)/env.md docs/env.md
	@echo "docs/env.md: $$(grep -c '^| `COLL_' docs/env.md) variables"

# ---- fuzzing and sanitizers (docs/testing.md) -----------------------------------
# Fuzzers: clang's libFuzzer with ASan+UBSan; the library is rebuilt with
# coverage instrumentation in $(BUILD)/fuzz, at -O1 like the sanitizer
# suites (the build took 39 s instead of 55 at -O2 on 2 cores). Each target
# runs from its seed corpus in tests/fuzz/corpus/<target>; new inputs go to
# $(BUILD)/fuzz/corpus.
.PHONY: fuzz fuzz-build fuzz-bins fuzz-corpus san-bins test-sanitize sanitize-asan sanitize-tsan
FUZZ_CC           ?= clang
FUZZ_SECONDS      ?= 60
FUZZ_TEST_SECONDS ?= 4
FUZZ_DIR          := $(BUILD)/fuzz
FUZZ_SAN          := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                     -fno-omit-frame-pointer
FUZZ_SRCS         := $(wildcard tests/fuzz/fuzz_*.c)

fuzz: deps-test
	@$(MAKE) $(JOBS) --no-print-directory fuzz-build
	@tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# Skipped (visibly, with the reason) where clang or libFuzzer is missing;
# targets built before are removed then, so that run.sh cannot run stale ones.
fuzz-build:
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then \
	    echo "fuzz: skipped: $(FUZZ_CC) is not installed (apt-get install clang)"; \
	    rm -f $(FUZZ_DIR)/fuzz_*; \
	elif ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
	        $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1; then \
	    echo "fuzz: skipped: $(FUZZ_CC) has no libFuzzer (apt-get install libclang-rt-14-dev)"; \
	    rm -f $(FUZZ_DIR)/fuzz_*; \
	else \
	    $(MAKE) $(JOBS) --no-print-directory BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) OPT="-O1 -g" \
	        SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins; \
	fi

# Inside the fuzz build ($(BUILD) is build/fuzz here).
fuzz-bins: $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/%)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(STLIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) -Itests/fuzz $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(STLIB) $(LDLIBS)

# The seed corpus from real frames (kept in the repository; rerun after a
# wire format change).
fuzz-corpus: $(BUILD)/tests/gen_corpus
	@$(BUILD)/tests/gen_corpus tests/fuzz/corpus
	@echo "fuzz-corpus: $$(ls tests/fuzz/corpus/*/seed_* | wc -l) seeds in tests/fuzz/corpus"

$(BUILD)/tests/gen_corpus: tests/fuzz/gen_corpus.c $(STLIB)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(STLIB) $(LDLIBS)

# Sanitizer suites: the test programs and everything they exec (collrun,
# helper_rank, examples) rebuilt in their own BUILD dirs with gcc.
# ASan+UBSan: every test program (about 3 minutes on 2 cores); TSan: in
# make test the programs whose tests start threads themselves (TSAN_TESTS),
# in make test-sanitize all. Tests that cannot run sanitized are skipped by
# tests/run.sh with the reason.
ASAN_BUILD  ?= $(BUILD)-asan
TSAN_BUILD  ?= $(BUILD)-tsan
ASAN_SAN    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
TSAN_SAN    := -fsanitize=thread -fno-omit-frame-pointer
TSAN_TESTS  ?= test_threads test_lifecycle test_stranger
SAN_TESTS   ?=
export ASAN_OPTIONS  ?= detect_leaks=1
export UBSAN_OPTIONS ?= halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS  ?= halt_on_error=1:second_deadlock_stack=1

# What a sanitized build needs (evaluated in its own BUILD): the test
# programs (SAN_BINS, default all) and what they exec.
SAN_BINS ?= $(TESTS)
san-bins: tools $(EXAMPLES) $(SAN_BINS) $(TEST_HELPERS)

# The matrices' short form under the sanitizers (COLL_TEST_SHORT, tests/harness.h;
# the plain suite checks every answer in full), at 2, 3 and 4 ranks: the ASan
# pass takes about 5 minutes instead of 12 on 2 cores.
SAN_SHORT ?= 2

# Everything: ASan+UBSan and TSan over every test program, the whole matrices
# (TSan alone takes about 12 minutes on 2 cores, hence the threaded subset in
# make test).
test-sanitize: deps-test
	@$(MAKE) $(JOBS) --no-print-directory sanitize-asan SAN_TESTS= SAN_SHORT=
	@$(MAKE) $(JOBS) --no-print-directory sanitize-tsan TSAN_TESTS="$(TEST_SRCS:tests/%.c=%)" SAN_SHORT=

sanitize-asan:
	@$(MAKE) $(JOBS) --no-print-directory BUILD=$(ASAN_BUILD) SAN="$(ASAN_SAN)" OPT="-O1 -g" san-bins
	@COLL_TEST_SANITIZER=asan COLL_TEST_SHORT=$(SAN_SHORT) tests/run.sh $(ASAN_BUILD) $(SAN_TESTS)

sanitize-tsan:
	@$(MAKE) $(JOBS) --no-print-directory BUILD=$(TSAN_BUILD) SAN="$(TSAN_SAN)" OPT="-O1 -g" san-bins \
	    SAN_BINS="$(TSAN_TESTS:%=$(TSAN_BUILD)/tests/%)"
	@COLL_TEST_SANITIZER=tsan COLL_TEST_SHORT=$(SAN_SHORT) tests/run.sh $(TSAN_BUILD) $(TSAN_TESTS)

# ---- against the peers: Open MPI, MPICH, Gloo (docs/benchmarks.md) -------------------
# make compare COMPARE_ARGS='--np 4 --coll all_gather --inplace'   (see bench/compare.sh)
# make plots regenerates docs/img/ from its own sweep (PLOTS_ARGS; about 10 minutes).
.PHONY: compare plots deps-compare
PEER_PKGS    := openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev g++ gnuplot-nox
COMPARE_ARGS ?=
PLOTS_ARGS   ?= --np 2,4 --coll all_reduce,all_gather,reduce_scatter,p2p --inplace --reps 3

deps-compare:
	@scripts/deps.sh $(PEER_PKGS)

compare: deps-compare all
	@bench/compare.sh --build $(BUILD) $(COMPARE_ARGS)

plots: deps-compare all
	@bench/compare.sh --build $(BUILD) --out $(BUILD)/plots $(PLOTS_ARGS)
	@bench/plot.sh --in $(BUILD)/plots --out docs/img

# ---- install ----------------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 libcoll/coll.h $(DESTDIR)$(PREFIX)/include/coll.h
	install -m 755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libcoll.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libcoll.so.$(SOVERSION)
	ln -sf libcoll.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libcoll.so
	install -m 644 $(STLIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@EXTRA_LIBS@|$(filter-out -pthread,$(LDLIBS))|g' libcoll/libcoll.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libcoll.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/coll.h $(DESTDIR)$(PREFIX)/lib/libcoll.* \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/libcoll.pc $(TOOLS:$(BUILD)/bin/%=$(DESTDIR)$(PREFIX)/bin/%)

clean:
	rm -rf $(BUILD)
