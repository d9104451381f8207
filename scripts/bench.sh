#!/bin/sh
# scripts/bench.sh [MODEL] - speed of ./run for each weight format, as a table.
#
# MODEL defaults to a random-weight checkpoint with Qwen2.5-0.5B's exact
# shapes, written once to build/bench-0.5b by tests/make_checkpoint (speed
# does not depend on the values of the weights). For each of bf16, bf16 with
# bf16 arithmetic, q8, q4 and f32 it runs `./run bench` (prefill of 128
# tokens, decode of 64), then
# decoding bf16 deep into the context, and the machine's memory bandwidth,
# which bounds decoding: every token reads every weight once.
#   REPEATS (default 3) and THREADS (default: all CPUs) tune the runs;
#   RUN_KERNELS=plain|avx2|avx512 picks a kernel path.
# scripts/bench_vs_llamacpp.sh compares with llama.cpp.
set -eu
cd "$(dirname "$0")/.."
repeats=${REPEATS:-3}
threads=${THREADS:-$(getconf _NPROCESSORS_ONLN)}
make -s run build/tests/make_checkpoint
model=${1:-build/bench-0.5b}
if [ $# -eq 0 ] && [ ! -f "$model/model.safetensors" ]; then
    echo "writing a 0.5B-shaped checkpoint to $model ..." >&2
    build/tests/make_checkpoint "$model" --seed 1 --set hidden_size=896 --set intermediate_size=4864 \
        --set num_hidden_layers=24 --set num_attention_heads=14 --set num_key_value_heads=2
fi
cc -O2 -pthread -o build/membw scripts/membw.c
bandwidth=$(build/membw "$threads")

# speed FLAGS...: "pp tg" from the last two lines of ./run bench
speed() {
    ./run bench "$model" -t "$threads" -r "$repeats" "$@" | tail -n 2 | sed 's/.*: \([0-9.]*\) tok\/s/\1/' | tr '\n' ' '
}
# weight_mb DTYPE: megabytes of weights a decoded token reads
weight_mb() {
    ./run info "$model" --dtype "$1" | sed -n 's/^memory to run: weights \([0-9.]*\) MB.*/\1/p'
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads, memory read at $bandwidth GB/s"
echo "model: $model"
echo
printf '%-9s %12s %10s %12s %18s\n' dtype "pp128 tok/s" "tg64 tok/s" "weights MB" "tg bound tok/s"
for dtype in bf16 bf16-math q8 q4 f32; do
    flags="--dtype ${dtype%-math}"
    [ "$dtype" = bf16-math ] && flags="$flags --math bf16"
    set -- $(speed $flags)
    mb=$(weight_mb "${dtype%-math}")
    bound=$(awk -v bw="$bandwidth" -v mb="$mb" 'BEGIN { printf "%.1f", bw * 1000 / mb }')
    printf '%-9s %12s %10s %12s %18s\n' "$dtype" "$1" "$2" "$mb" "$bound"
done
echo
echo "decode (bf16) deep in the context:"
for depth in 1 1024 4096; do
    set -- $(speed -p 1 -n 64 --depth "$depth" -c $((depth + 64)))
    printf '  tg64 at position %-5s %8s tok/s\n' "$depth" "$2"
done
