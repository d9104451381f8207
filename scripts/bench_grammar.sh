#!/bin/sh
# scripts/bench_grammar.sh - what constrained decoding costs.
#
#   sh scripts/bench_grammar.sh [MODEL]
#
# 1. Mask time: builds scripts/bench_grammar.c against the library and runs
#    it on the Qwen2.5 tokenizer (151,665 tokens) over the JSON schemas and
#    valid texts of tests/data/schema_cases.json: the median and p99 time of
#    one token mask, cold (a fresh grammar per text) and warm (one grammar per
#    schema, its cached masks kept).
# 2. Decode speed (when MODEL, a checkpoint folder, is given): `run gen` of 64
#    greedy tokens without and with a JSON schema, three runs each, and the
#    ratio of their best decode speeds (tok/s from the statistics line).
# A benchmark, not a test: the figures depend on the machine and on what else
# runs on it; run it on a quiet machine.
set -e
cd "$(dirname "$0")/.."
model=${1:-}
make -s run tests/data/qwen2.5-tokenizer.json
objects=$(ls build/*.o build/*/*.o 2>/dev/null | grep -v '/main\.o$')
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -O3 -o build/bench_grammar scripts/bench_grammar.c $objects -lm -pthread
./build/bench_grammar tests/data/qwen2.5-tokenizer.json tests/data/schema_cases.json
[ -n "$model" ] || exit 0

schema='{"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":8}},"required":["name","age","tags"]}'
# best_speed ARGS...: the best decode tok/s of three runs of run gen.
best_speed() {
    for i in 1 2 3; do
        ./run gen "$model" -p 'A person, as JSON:' -n 64 --temp 0 "$@" 2>&1 >/dev/null |
            sed -n 's/.*generated: [0-9]* tokens\{0,1\}, \([0-9.]*\) tok\/s.*/\1/p'
    done | sort -n | tail -n 1
}
free=$(best_speed)
constrained=$(best_speed -j "$schema")
echo "decode: unconstrained $free tok/s, under the schema $constrained tok/s, ratio $(awk "BEGIN { printf \"%.2f\", $constrained / $free }")"
