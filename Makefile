# Makefile for run.
#   make                 build ./run (-O3, a portable x86-64 binary that picks its
#                        kernels by CPUID at run time: plain C, AVX2, AVX-512)
#   make chat            build ./run, download the model if needed, chat with it
#   make test            build everything and run the whole test suite (on the
#                        best kernel path and on plain C; test_kernels and
#                        test_net on every path)
#   make sanitize        build ./run-san and the tests with ASan + UBSan
#   make test-sanitize   the same under the sanitizers (the whole suite on the
#                        best path only)
#   make fuzz            build the libFuzzer targets (clang) into build-fuzz/;
#                        scripts/fuzz.sh runs them
#   make clean
# Flags: `make CFLAGS="-O2 -march=x86-64-v3"` replaces the optimisation
# flags, `make EXTRA_CFLAGS=...` adds to them; CC picks the compiler.

CC ?= cc
CFLAGS ?= -O3
EXTRA_CFLAGS ?=
# -ffp-contract=off: no multiply-add is fused unless the code says so, so
# that every kernel path rounds the same way.
BASE_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -pthread -ffp-contract=off
LDLIBS = -lm -pthread
SAN_CFLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The SIMD kernel paths, each file built for its instruction set (x86-64
# only; elsewhere they compile to nothing and the plain path runs).
X86 := $(filter x86_64% i686% i386%,$(shell $(CC) -dumpmachine))
AVX2_FLAGS = $(if $(X86),-mavx2 -mfma -mf16c)
AVX512_FLAGS = $(if $(X86),$(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16)
# The library is built for libFuzzer's coverage; each target links its runtime.
FUZZ_CFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer-no-link

BUILD ?= build
BIN ?= run
# The Jinja engine's rooms are in jinja/ (template.c is their public face).
LIB_SRC = $(filter-out main.c,$(wildcard *.c)) $(wildcard jinja/*.c)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC = $(wildcard tests/test_*.c)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_SRC = $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN = $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/%)
# Writes random-weight checkpoints for the tests (tests/make_checkpoint.c).
FIXTURE_TOOL = $(BUILD)/tests/make_checkpoint
# Large test fixtures are committed gzip-compressed and unpacked on demand.
TEST_DATA = $(patsubst %.gz,%,$(wildcard tests/data/*.gz))
# The model `make chat` talks to: a Hugging Face repo id, downloaded once
# into models/<name>, or a local checkpoint folder or .safetensors file, used
# as it is. ARGS are passed on to `run chat` (make chat ARGS="--temp 0.2").
MODEL ?= Qwen/Qwen2.5-0.5B-Instruct
ARGS ?=

ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS) $(EXTRA_CFLAGS)

.PHONY: all chat test sanitize build-san-tests test-sanitize fuzz fuzz-targets clean
all: $(BIN)

$(BIN): $(BUILD)/main.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# The pages built into the binary: their headers are made again when a page
# changes (python3, standard library only); tests/test_page.sh checks that
# the committed headers are in step with the pages.
report_page.h chat_page.h &: report_page.html chat_page.html scripts/embed_page.py
	python3 scripts/embed_page.py

$(BUILD)/%.o: %.c $(wildcard *.h jinja/*.h) | $(BUILD) $(BUILD)/jinja
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/kernels_avx2.o: ALL_CFLAGS += $(AVX2_FLAGS)
$(BUILD)/kernels_avx512.o: ALL_CFLAGS += $(AVX512_FLAGS)

$(BUILD)/tests/%: tests/%.c tests/test.c tests/test.h $(LIB_OBJ) $(wildcard *.h jinja/*.h) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $< tests/test.c $(LIB_OBJ) $(LDLIBS)

$(BUILD) $(BUILD)/jinja:
	mkdir -p $(BUILD)/tests $(BUILD)/jinja

# A folder that ./run info --check accepts is not downloaded again, so chatting with
# a downloaded model needs no network; otherwise download.sh fetches what is
# missing (and resumes what was interrupted).
chat: $(BIN)
	@if [ -e '$(MODEL)' ]; then dir='$(MODEL)'; else \
	  dir='models/$(notdir $(MODEL))'; \
	  ./$(BIN) info --check "$$dir" >/dev/null 2>&1 || \
	    RUN=./$(BIN) sh scripts/download.sh '$(MODEL)' "$$dir" || exit 1; \
	fi; \
	exec ./$(BIN) chat "$$dir" $(ARGS)

tests/data/%: tests/data/%.gz
	gzip -dc $< > $@

test: $(BIN) $(TEST_BIN) $(FIXTURE_TOOL) $(TEST_DATA)
	TESTBIN=$(BUILD)/tests RUN=./$(BIN) sh tests/run_tests.sh

sanitize:
	$(MAKE) BUILD=build-san BIN=run-san CFLAGS="$(SAN_CFLAGS)" run-san build-san-tests

build-san-tests: $(TEST_BIN) $(FIXTURE_TOOL) $(TEST_DATA)

# allocator_may_return_null: a refused allocation reaches xmalloc's own
# "out of memory" error, as in the normal build, instead of ASan's report.
test-sanitize: sanitize
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  FULL_PATHS=best TESTBIN=build-san/tests RUN=./run-san sh tests/run_tests.sh

fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang CFLAGS="$(FUZZ_CFLAGS)" fuzz-targets

fuzz-targets: $(FUZZ_BIN) $(TEST_DATA)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_OBJ) $(wildcard *.h jinja/*.h) $(wildcard tests/fuzz/*.h) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB_OBJ) $(LDLIBS)

clean:
	rm -rf build build-san build-fuzz run run-san $(TEST_DATA)
