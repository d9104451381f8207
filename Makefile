# Makefile for run.
#   make                 build ./run (-O3 -march=native by default)
#   make test            build everything and run the whole test suite
#   make sanitize        build ./run-san and the tests with ASan + UBSan
#   make test-sanitize   run the whole test suite under the sanitizers
#   make clean
# Flags: `make CFLAGS="-O2 -march=x86-64-v3"` replaces the optimisation
# flags, `make EXTRA_CFLAGS=...` adds to them; CC picks the compiler.

CC ?= cc
CFLAGS ?= -O3 -march=native
EXTRA_CFLAGS ?=
BASE_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -pthread
LDLIBS = -lm -pthread
SAN_CFLAGS = -O1 -g -march=native -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

BUILD ?= build
BIN ?= run
LIB_SRC = $(filter-out main.c,$(wildcard *.c))
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC = $(wildcard tests/test_*.c)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# Writes random-weight checkpoints for the tests (tests/make_checkpoint.c).
FIXTURE_TOOL = $(BUILD)/tests/make_checkpoint
# Large test fixtures are committed gzip-compressed and unpacked on demand.
TEST_DATA = $(patsubst %.gz,%,$(wildcard tests/data/*.gz))

ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS) $(EXTRA_CFLAGS)

.PHONY: all test sanitize test-sanitize clean
all: $(BIN)

$(BIN): $(BUILD)/main.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c $(wildcard *.h) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c tests/test.c tests/test.h $(LIB_OBJ) $(wildcard *.h) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $< tests/test.c $(LIB_OBJ) $(LDLIBS)

$(BUILD):
	mkdir -p $(BUILD)/tests

tests/data/%: tests/data/%.gz
	gzip -dc $< > $@

test: $(BIN) $(TEST_BIN) $(FIXTURE_TOOL) $(TEST_DATA)
	TESTBIN=$(BUILD)/tests RUN=./$(BIN) sh tests/run_tests.sh

sanitize:
	$(MAKE) BUILD=build-san BIN=run-san CFLAGS="$(SAN_CFLAGS)" run-san build-san-tests

build-san-tests: $(TEST_BIN) $(FIXTURE_TOOL) $(TEST_DATA)

test-sanitize: sanitize
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  TESTBIN=build-san/tests RUN=./run-san sh tests/run_tests.sh

clean:
	rm -rf build build-san run run-san $(TEST_DATA)
