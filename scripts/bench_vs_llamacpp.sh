#!/bin/sh
# scripts/bench_vs_llamacpp.sh [MODEL] - run against llama.cpp on one
# checkpoint, on this machine, in one sitting, with the ratios the speed
# goals are stated in and the machine's own bounds.
#
# What it does, in order:
#   1. builds ./run and scripts/membw.c;
#   2. converts MODEL (a Hugging Face checkpoint folder; default: the
#      0.5B-shaped random checkpoint scripts/bench.sh writes) to GGUF once,
#      into $MODEL/gguf/: BF16 with ../shared/tools/make_gguf.py, then Q8_0
#      and Q4_0 with llama-quantize;
#   3. measures the memory read bandwidth and the fp32 FMA peak (membw);
#   4. start-up: `run info`'s wall time; per format, `run prepare` (once),
#      then the wall time and peak memory of `run gen -n 1` (the second
#      start: the prepared weights mapped) beside `llama-completion -n 1`,
#      both with a context of 4096 (llama.cpp's default is the model's whole
#      context: 128k positions of KV cache for Llama 3.1);
#      and the memory two `run serve` processes on one model hold (PSS);
#   5. ROUNDS times over: `./run bench` and `llama-bench` alternately for
#      each pair of formats (run bf16 exact and bf16 arithmetic vs llama.cpp
#      BF16, q8 vs Q8_0, q4 vs Q4_0): PROMPTS (pp128, pp512) and tg64, then
#      pp512 and tg32 at depth 4096 (bf16, q8);
#   6. decodes q8 beside a CPU-bound process (yes >/dev/null) with the
#      default thread count and with -t 1, and reads the default thread
#      count under taskset -c 0;
#   7. prints, per test, both speeds (median of the rounds, and their range),
#      the ratio and its goal; decode against the bandwidth bound (weight
#      bytes read per token / bandwidth, the highest reading of membw just
#      before and after that format's tests: a shared host's bandwidth moves
#      by a factor of two or more within minutes); bf16 prefill against the
#      FMA peak.
#
# llama.cpp is built from source outside this repository, e.g.:
#   git clone <llama.cpp repository> ../llama.cpp
#   cmake -S ../llama.cpp -B ../llama.cpp/build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release
#   cmake --build ../llama.cpp/build -j --target llama-bench llama-quantize
# Environment:
#   LLAMA_CPP  its source folder (default ../llama.cpp; binaries in build/bin,
#              gguf-py for make_gguf.py)
#   THREADS    threads for both (default: the CPUs this process may use)
#   REPEATS    repeats inside each run (default 3); ROUNDS (default 2)
#   DEPTH      0 skips the tests at depth (default 4096)
#   FORMATS    the formats compared (default "bf16 q8 q4"); PROMPTS the prompt
#              lengths (default "128 512"); START=0 skips the start-up figures,
#              CONTENTION=0 the decode beside a busy process
# An 8B checkpoint (gen_model.py --preset llama3.1-8b --shards 4) fits this
# way on a 24 GiB machine without its 16 GB BF16 GGUF:
#   FORMATS="q8 q4" PROMPTS=128 DEPTH=0 CONTENTION=0 ROUNDS=1 sh scripts/bench_vs_llamacpp.sh MODEL
# (with Q8_0.gguf and Q4_0.gguf already in MODEL/gguf).
# Other processes disturb the figures: the script prints the load average at
# the start and the end; run it on a quiet machine.
set -eu
cd "$(dirname "$0")/.."
llama=${LLAMA_CPP:-../llama.cpp}
bin=$llama/build/bin
threads=${THREADS:-$(nproc)}
repeats=${REPEATS:-3}
rounds=${ROUNDS:-2}
depth=${DEPTH:-4096}
formats=${FORMATS:-bf16 q8 q4}
prompts=${PROMPTS:-128 512}
start=${START:-1}
shared=../shared/tools

for tool in llama-bench llama-quantize llama-completion; do
    [ -x "$bin/$tool" ] || { echo "bench_vs_llamacpp: $bin/$tool is missing: build llama.cpp first (see the top of this script)" >&2; exit 1; }
done
make -s run build/tests/make_checkpoint
cc -O2 -pthread -o build/membw scripts/membw.c
model=${1:-build/bench-0.5b}
if [ $# -eq 0 ] && [ ! -f "$model/model.safetensors" ]; then
    echo "writing a 0.5B-shaped checkpoint to $model ..." >&2
    build/tests/make_checkpoint "$model" --seed 1 --set hidden_size=896 --set intermediate_size=4864 \
        --set num_hidden_layers=24 --set num_attention_heads=14 --set num_key_value_heads=2
fi
# The GGUF conversion writes the vocabulary too: a checkpoint without a
# tokenizer gets Qwen2.5's from ../shared (the vocabulary sizes match).
if [ ! -f "$model/tokenizer.json" ]; then
    cp ../shared/models/qwen2.5-tokenizer/tokenizer.json ../shared/models/qwen2.5-tokenizer/tokenizer_config.json "$model/"
fi
gguf=$model/gguf
mkdir -p "$gguf"
# gguf_of FORMAT: llama.cpp's file of the same weights
gguf_of() { case $1 in bf16) echo "$gguf/bf16.gguf" ;; q8) echo "$gguf/Q8_0.gguf" ;; q4) echo "$gguf/Q4_0.gguf" ;; esac; }
missing=
for f in $formats; do [ -f "$(gguf_of "$f")" ] || missing=yes; done
if [ -n "$missing" ] && [ ! -f "$gguf/bf16.gguf" ]; then
    echo "converting $model to $gguf/bf16.gguf ..." >&2
    PYTHONPATH=$llama/gguf-py /usr/bin/python3 "$shared/make_gguf.py" "$model" "$gguf/bf16.gguf" --type bf16 >&2
fi
for f in $formats; do
    q=$(basename "$(gguf_of "$f")" .gguf)
    [ -f "$gguf/$q.gguf" ] || "$bin/llama-quantize" "$gguf/bf16.gguf" "$gguf/$q.gguf" "$q" >/dev/null 2>&1
done

results=$(mktemp)
hog=
trap 'rm -f "$results"; [ -z "$hog" ] || kill "$hog" 2>/dev/null' EXIT
# record NAME TOK_S: one measurement
record() { echo "$1 $2" >>"$results"; }

# run_bench TAG SUFFIX FLAGS...: ./run bench; records TAG-ppN SUFFIX and TAG-tgN SUFFIX
run_bench() {
    tag=$1 suffix=$2
    shift 2
    ./run bench "$model" -t "$threads" -r "$repeats" "$@" 2>/dev/null | tail -n 2 |
        sed -n 's/^\(pp[0-9]*\|tg[0-9]*\): \([0-9.]*\) tok\/s/\1 \2/p' |
        while read -r test speed; do record "$tag-$test$suffix" "$speed"; done
}

# llama_bench TAG SUFFIX GGUF FLAGS...: llama-bench; records TAG-ppN/tgN SUFFIX
llama_bench() {
    tag=$1 suffix=$2 file=$3
    shift 3
    "$bin/llama-bench" -m "$file" -t "$threads" -r "$repeats" -o csv "$@" 2>/dev/null | awk -F, -v tag="$tag" -v suffix="$suffix" '
        NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i }; next }
        { gsub(/"/, "")
          p = $col["n_prompt"]; g = $col["n_gen"]
          name = p > 0 ? "pp" p : "tg" g
          print tag "-" name suffix, $col["avg_ts"] }' >>"$results"
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
bandwidth=$(build/membw "$threads")
peak=$(build/membw --flops "$threads")
# timed NAME COMMAND...: records NAME-wall (seconds) and NAME-rss (MB, the
# peak resident memory) of one run of COMMAND, its output discarded.
timed() {
    name=$1
    shift
    /usr/bin/python3 -c '
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
wall = time.perf_counter() - t
print("%.3f %.1f" % (wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))' "$@" |
        { read -r wall rss; record "$name-wall" "$wall"; record "$name-rss" "$rss"; }
}

# pss_of_two FORMAT: MB of memory (PSS, summed) two `run serve` processes on
# one model hold once each has generated a token: weights mapped from one
# file count once.
pss_of_two() {
    logs="$results.a $results.b"
    pids=
    for log in $logs; do
        ./run serve "$model" --dtype "$1" --port 0 -c 256 >/dev/null 2>"$log" &
        pids="$pids $!"
    done
    for log in $logs; do  # up, then one token generated (every weight read)
        for i in $(seq 600); do grep -q 'listening on' "$log" 2>/dev/null && break; sleep 0.1; done
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log")
        /usr/bin/python3 -c '
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/v1/completions" % sys.argv[1],
    data=b"{\"prompt\": \"Hi\", \"max_tokens\": 1}", headers={"Content-Type": "application/json"}), timeout=600).read()' "$port"
    done
    total=0
    for pid in $pids; do
        kb=$(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)
        total=$((total + ${kb:-0}))
    done
    kill $pids 2>/dev/null
    wait $pids 2>/dev/null || true
    rm -f $logs
    record "pss2-$1" "$(awk -v k="$total" 'BEGIN { printf "%.1f", k / 1024 }')"
}

if [ "$start" -ne 0 ]; then
    echo "start-up ..." >&2
    for i in $(seq "$repeats"); do timed info ./run info "$model"; done
    for f in $formats; do
        ./run prepare "$model" --dtype "$f" >/dev/null 2>&1
        ./run gen "$model" -p Hi -n 1 --temp 0 --dtype "$f" >/dev/null 2>&1  # the page cache warm
        for i in $(seq "$repeats"); do
            timed "start-run-$f" ./run gen "$model" -p Hi -n 1 --temp 0 --dtype "$f" -c 4096
            timed "start-llama-$f" "$bin/llama-completion" -m "$(gguf_of "$f")" -p Hi -n 1 --temp 0 -no-cnv -c 4096
        done
        pss_of_two "$f"
    done
fi
for round in $(seq "$rounds"); do
    echo "round $round of $rounds ..." >&2
    pp=$(echo "$prompts" | tr ' ' ',')
    for f in $formats; do
        # The bandwidth moves on a shared host: read it beside each format's tests.
        record "bw-$f" "$(build/membw "$threads")"
        for p in $prompts; do run_bench "run-$f" "" --dtype "$f" -p "$p" -n 64; done
        llama_bench "llama-$f" "" "$(gguf_of "$f")" -p "$pp" -n 64
        if [ "$f" = bf16 ]; then
            for p in $prompts; do run_bench run-bf16math "" --dtype bf16 --math bf16 -p "$p" -n 64; done
        fi
        record "bw-$f" "$(build/membw "$threads")"
    done
    if [ "$depth" -gt 0 ]; then
        for f in $formats; do
            [ "$f" = q4 ] && continue
            run_bench "run-$f" "@d$depth" --dtype $f --depth "$depth" -p 512 -n 32 -c $((depth + 512))
            llama_bench "llama-$f" "@d$depth" "$(gguf_of "$f")" -d "$depth" -p 512 -n 32
        done
    fi
done
# Contention: one CPU-bound process beside decoding with the default thread
# count, then with -t 1; and the default thread count pinned to one CPU.
if [ "${CONTENTION:-1}" -ne 0 ]; then
    yes >/dev/null &
    hog=$!
    for round in $(seq "$rounds"); do
        ./run bench "$model" -r "$repeats" --dtype q8 -p 16 -n 64 2>/dev/null | tail -n 1 | sed -n 's/^tg64: \([0-9.]*\).*/\1/p' |
            while read -r speed; do record contended-default "$speed"; done
        ./run bench "$model" -r "$repeats" --dtype q8 -p 16 -n 64 -t 1 2>/dev/null | tail -n 1 | sed -n 's/^tg64: \([0-9.]*\).*/\1/p' |
            while read -r speed; do record contended-t1 "$speed"; done
    done
    kill "$hog"
    hog=
fi

pinned=$(taskset -c 0 ./run bench "$model" -r 1 --dtype q8 -p 1 -n 1 2>/dev/null | sed -n 's/.*, \([0-9]*\) threads\{0,1\},.*/\1/p')
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# stat NAME [FORMAT]: "median min max" of the recorded values (printf
# FORMAT, default %.1f), or "- - -"
stat() {
    awk -v name="$1" -v fmt="${2:-%.1f}" '$1 == name { v[n++] = $2 }
        END { if (n == 0) { print "- - -"; exit }
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
              m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
              printf fmt " " fmt " " fmt "\n", m, v[0], v[n - 1] }' "$results"
}

# weight_mb DTYPE: megabytes of weights a decoded token reads (a mixture of
# experts: its chosen experts only)
weight_mb() { ./run info "$model" --dtype "$1" | sed -n 's/^read per decoded token: [0-9]* bytes of weights (\([0-9.]*\) MB.*/\1/p'; }
file_mb() { awk -v b="$(stat_bytes "$1")" 'BEGIN { printf "%.1f", b / 1e6 }'; }
stat_bytes() { wc -c <"$1" | tr -d ' '; }
# Matrix multiply-adds per prompt token: every layer's projections (the
# output head runs for the last token only); in a mixture of experts' sparse
# layers, the router and the chosen experts.
flops_per_token=$(/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
d, h, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
hd = c.get("head_dim") or d // c["num_attention_heads"]
q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
E, k, f = c.get("num_experts", 0), c.get("num_experts_per_tok", 0), c.get("moe_intermediate_size", 0)
sparse = [c.get("model_type") == "qwen3_moe" and E > 0 and l not in c.get("mlp_only_layers", []) and
          (l + 1) % c.get("decoder_sparse_step", 1) == 0 for l in range(L)]
mlp = sum(d * E + 3 * d * f * k if s else 3 * d * h for s in sparse)
print(2 * (L * (d * (q + 2 * kv) + q * d) + mlp))' "$model")

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads"
echo "memory read $bandwidth GB/s, fp32 FMA peak $peak GFLOP/s (scripts/membw.c)"
echo "model: $model; llama.cpp: $(git -C "$llama" describe --always 2>/dev/null || echo "$llama")"
echo "speeds in tok/s: median of $rounds rounds [min-max], each round the median (run) or mean (llama-bench) of $repeats"
echo
printf '%-22s %24s %24s %7s %7s\n' test run llama.cpp ratio goal
# row LABEL RUN_NAME LLAMA_NAME GOAL
row() {
    set -- "$1" "$2" "$3" "$4" $(stat "$2") $(stat "$3")
    ratio=$(awk -v a="$5" -v b="$8" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
    printf '%-22s %8s [%6s-%6s] %8s [%6s-%6s] %7s %7s\n' "$1" "$5" "$6" "$7" "$8" "$9" "${10}" "$ratio" "$4"
}
# goal FORMAT TEST: the ratio the goals ask of run over llama.cpp
goal() {
    case $1-$2 in
        bf16-tg*) echo '>=1.0' ;; bf16math-pp*) echo '>=1.3' ;; bf16-pp*) echo '>=1.0' ;; bf16math-*) echo '' ;;
        q8-tg*|q4-tg*) echo '>=1.15' ;; q8-pp*) echo '>=1.5' ;; q4-pp*) echo '>=1.2' ;;
    esac
}
for t in $(for p in $prompts; do echo "pp$p"; done) tg64; do
    for f in $formats; do
        row "$f $t" "run-$f-$t" "llama-$f-$t" "$(goal "$f" "$t")"
        [ "$f" = bf16 ] && row "bf16 math=bf16 $t" "run-bf16math-$t" "llama-bf16-$t" "$(goal bf16math "$t")"
    done
done
if [ "$depth" -gt 0 ]; then
    for f in $formats; do
        [ "$f" = q4 ] && continue
        for t in pp512 tg32; do row "$f $t @ depth $depth" "run-$f-$t@d$depth" "llama-$f-$t@d$depth" '>=1.2'; done
    done
fi

if [ "$start" -ne 0 ]; then
    echo
    echo "start-up (seconds of wall time, median of $repeats [min-max]; peak resident MB):"
    set -- $(stat info-wall %.3f) $(stat info-rss)
    echo "  run info: $1 s [$2-$3], $4 MB (goal <= 0.05 s, reads no weights)"
    printf '  %-6s %26s %26s %26s\n' format "run gen -n 1 (prepared)" "llama-completion -n 1" "two run serve: PSS"
    for f in $formats; do
        set -- $(stat "start-run-$f-wall" %.2f) $(stat "start-run-$f-rss") $(stat "start-llama-$f-wall" %.2f) \
            $(stat "start-llama-$f-rss")
        printf '  %-6s %26s %26s %23s MB\n' "$f" "$1 s, $4 MB" "$7 s, ${10} MB" "$(stat "pss2-$f" | cut -d' ' -f1)"
    done
    echo "  (goals: the first token <= 1 s from a second start; two processes hold the weights once)"
fi

echo
set -- $(stat contended-default) $(stat contended-t1)
echo "contention (q8 tg64 beside one CPU-bound process): default threads $1 tok/s [$2-$3], -t 1 $4 tok/s [$5-$6]," \
    "ratio $(awk -v a="$1" -v b="$4" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.2f", a / b }') (goal >= 0.9)"
echo "pinned to one CPU (taskset -c 0), the default thread count is $pinned (goal 1)"

echo
echo "decode against the bandwidth bound (weight bytes per token / the bandwidth read before and after"
echo "that format's tests, the highest of the readings); goal >= 0.85"
printf '%-10s %12s %18s %12s %10s %9s\n' format "MB/token" "GB/s [min-max]" "bound tok/s" "tg64" fraction
bound_row() {  # bound_row LABEL MB NAME FORMAT
    set -- "$1" "$2" "$3" $(stat "bw-$4")
    bw=$6
    set -- "$1" "$2" "$(awk -v bw="$bw" -v mb="$2" 'BEGIN { if (bw == "-") print "-"; else printf "%.1f", bw * 1000 / mb }')" \
        $(stat "$3") "$4 [$5-$6]"
    printf '%-10s %12s %18s %12s %10s %9s\n' "$1" "$2" "$7" "$3" "$4" \
        "$(awk -v a="$4" -v b="$3" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.2f", a / b }')"
}
for f in $formats; do bound_row "run $f" "$(weight_mb "$f")" "run-$f-tg64" "$f"; done
# (A mixture of experts' GGUF holds every expert: its size is not what a token reads.)
if ! ./run info "$model" | grep -q '^experts:'; then
    for f in $formats; do bound_row "llama $f" "$(file_mb "$(gguf_of "$f")")" "llama-$f-tg64" "$f"; done
fi

echo
echo "prefill against the fp32 FMA peak ($peak GFLOP/s; $(awk -v f="$flops_per_token" 'BEGIN { printf "%.2f", f / 1e9 }') GFLOP per token in the matrices)"
for name in run-bf16-pp128 run-bf16-pp512 run-bf16math-pp128 run-bf16math-pp512 run-q8-pp128 run-q4-pp128; do
    set -- $(stat "$name")
    awk -v n="$name" -v s="$1" -v f="$flops_per_token" -v p="$peak" \
        'BEGIN { if (s == "-") exit; printf "  %-20s %8.1f tok/s = %6.1f GFLOP/s = %.2f of the peak%s\n", n, s, s * f / 1e9, s * f / 1e9 / p, n == "run-bf16-pp128" ? " (goal for bf16 exact: >= 0.9)" : "" }'
done
