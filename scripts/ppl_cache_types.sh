#!/bin/sh
# scripts/ppl_cache_types.sh MODEL - what each KV cache type costs in
# accuracy: the perplexity of one text with the keys and values held as f32
# (exact), bf16 and q8_0, each against f32, for run; and, when LLAMA_CPP_BIN
# names a llama.cpp build, the same for llama.cpp's f16 and q8_0 caches
# against its own f32, on a GGUF of the same weights.
#
# MODEL is a Hugging Face checkpoint folder (qwen2, qwen3 or llama for the
# llama.cpp part: what ../shared/tools/make_gguf.py converts). Its GGUF is
# written once, as bf16 (the weights bit for bit), into MODEL/gguf/.
#
# Each tool is compared only with itself: run scores the text in sliding
# windows of CTX tokens (`run ppl -c CTX --stride CTX/2`: every token once),
# llama-perplexity in chunks of CTX tokens, each scoring its second half;
# both with the weights as stored (bf16). llama.cpp's f32 and f16 caches run
# without flash attention: its CPU flash attention computes in f16 whatever
# the cache holds (f32 then gives f16's perplexity exactly). Its q8_0 cache
# needs flash attention; the table shows f32 with flash attention too, so
# that the part of q8_0's difference that flash attention makes is seen.
#
# Environment:
#   TEXT           the text (default tests/data/ppl_text.txt: 300 bytes, about
#                  70 tokens; llama.cpp needs at least 2 x CTX tokens of it)
#   CTX            window / chunk length (default 32)
#   THREADS        threads for both (default: the CPUs this process may use)
#   LLAMA_CPP_BIN  folder of llama-perplexity (e.g. ../llama.cpp/build/bin);
#                  unset: run only
#   LLAMA_CPP      llama.cpp's source folder, for make_gguf.py's gguf-py
#                  (default: LLAMA_CPP_BIN/../..)
# Perplexity figures are not speed figures, but the runs take CPU time: on a
# shared machine use a small model or a short text.
set -eu
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: scripts/ppl_cache_types.sh MODEL" >&2; exit 2; }
model=$1
text=${TEXT:-tests/data/ppl_text.txt}
ctx=${CTX:-32}
threads=${THREADS:-$(nproc)}
bin=${LLAMA_CPP_BIN:-}
[ -d "$model" ] || { echo "ppl_cache_types: $model is not a checkpoint folder" >&2; exit 1; }
[ -f "$text" ] || { echo "ppl_cache_types: $text: no such file" >&2; exit 1; }
make -s run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A checkpoint without a tokenizer (a generated one) gets Qwen2.5's from
# ../shared: run needs it for the text, the GGUF conversion for its vocabulary.
if [ ! -f "$model/tokenizer.json" ]; then
    cp ../shared/models/qwen2.5-tokenizer/tokenizer.json ../shared/models/qwen2.5-tokenizer/tokenizer_config.json "$model/"
fi

# table_row NAME PPL F32_PPL [NOTE]: a row with the difference from f32,
# absolute and relative (in percent)
table_row() {
    awk -v name="$1" -v p="$2" -v base="$3" -v note="${4:-}" 'BEGIN {
        if (p == "-") { printf "  %-6s %s\n", name, "not available (see above)"; exit }
        printf "  %-6s %14.6f %+14.6f %+10.4f%%%s\n", name, p, p - base, (p / base - 1) * 100, note }'
}

echo "text: $text ($(./run tok "$model" -f "$text" | wc -w) tokens), windows of $ctx tokens, $threads threads"
echo
echo "run ($model, weights as stored):"
echo "  cache      perplexity    minus f32's    relative"
base=
for type in f32 bf16 q8_0; do
    if ./run ppl "$model" "$text" -c "$ctx" --stride $((ctx / 2)) -t "$threads" -ctk $type -ctv $type \
        >"$tmp/out" 2>"$tmp/err"; then
        p=$(sed -n 's/^perplexity: \([0-9.]*\) .*/\1/p' "$tmp/out")
    else
        echo "  ($type: $(tail -n 1 "$tmp/err"))"
        p=-
    fi
    [ -n "$base" ] || base=$p
    table_row "$type" "$p" "$base"
done

if [ -z "$bin" ]; then
    echo
    echo "llama.cpp: LLAMA_CPP_BIN is not set"
    exit 0
fi
[ -x "$bin/llama-perplexity" ] || { echo "ppl_cache_types: $bin/llama-perplexity is missing" >&2; exit 1; }
source_dir=${LLAMA_CPP:-$bin/../..}
gguf=$model/gguf/bf16.gguf
if [ ! -f "$gguf" ]; then
    mkdir -p "$model/gguf"
    echo "converting $model to $gguf ..." >&2
    PYTHONPATH=$source_dir/gguf-py /usr/bin/python3 ../shared/tools/make_gguf.py "$model" "$gguf" --type bf16 >&2
fi
echo
echo "llama.cpp ($gguf):"
echo "  cache      perplexity    minus f32's    relative"
base=
for run in "f32 off" "f16 off" "q8_0 on" "f32 on"; do
    set -- $run
    type=$1 fa=$2
    if "$bin/llama-perplexity" -m "$gguf" -f "$text" -c "$ctx" -b "$ctx" -t "$threads" -fa "$fa" -ctk "$type" -ctv "$type" \
        >"$tmp/out" 2>&1; then
        p=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/out")
    else
        p=
    fi
    if [ -z "$p" ]; then
        echo "  ($type: llama-perplexity failed: $(grep -iE 'error|failed|need' "$tmp/out" | tail -n 1))"
        p=-
    fi
    [ -n "$base" ] || base=$p
    table_row "$type" "$p" "$base" "$([ "$fa" = on ] && echo "   (flash attention)")"
done
