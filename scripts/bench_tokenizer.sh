#!/bin/sh
# scripts/bench_tokenizer.sh - how fast the tokenizer loads and encodes.
#
#   sh scripts/bench_tokenizer.sh [TOKENIZER_JSON] [RUNS]
#
# Builds scripts/bench_tokenizer.c against the library and runs it RUNS times
# (default 7), each in a fresh process: loading tokenizer.json (default: the
# Qwen2.5 one in tests/data), then encoding a 1 MiB text made from the golden
# texts and the repository's C sources (see bench_tokenizer.c). Prints every
# run, then the median and the best of each figure. A benchmark, not a test:
# the figures depend on the machine and on what else runs on it.
set -e
cd "$(dirname "$0")/.."
tokenizer=${1:-tests/data/qwen2.5-tokenizer.json}
runs=${2:-7}
make -s run tests/data/qwen2.5-tokenizer.json tests/data/qwen3-tokenizer.json
objects=$(ls build/*.o build/jinja/*.o | grep -v '/main\.o$')
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -O3 -march=native -o build/bench_tokenizer \
    scripts/bench_tokenizer.c $objects -lm -pthread
sources=$(ls ./*.c ./*.h | grep -v unicode_tables.h)  # not the generated tables: numbers only
i=0
while [ "$i" -lt "$runs" ]; do
    ./build/bench_tokenizer "$tokenizer" tests/data/qwen2.5.jsonl $sources
    i=$((i + 1))
done | tee build/bench_tokenizer.log
# The median and the best of each figure (the odd fields hold the values):
# other programs running at the same time make a figure worse, never better.
awk '{ for (f = 2; f <= 10; f += 2) { name[f] = $(f - 1); v[f, NR] = $f } }
     END { for (f = 2; f <= 10; f += 2) {
               n = 0; for (r = 1; r <= NR; r++) s[++n] = v[f, r]
               for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++) if (s[b] < s[a]) { x = s[a]; s[a] = s[b]; s[b] = x }
               best = f == 2 ? s[1] : s[n]
               printf "%-13s median %10s  best %10s\n", name[f], s[int((n + 1) / 2)], best } }' build/bench_tokenizer.log
