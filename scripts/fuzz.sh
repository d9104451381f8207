#!/bin/sh
# scripts/fuzz.sh SECONDS [TARGET...] - builds the libFuzzer targets (make
# fuzz) and runs each one (all of tests/fuzz/fuzz_*.c, or the TARGETs named,
# e.g. json encode) for SECONDS against its corpus, tests/fuzz/corpus/TARGET/.
# What a run finds that adds coverage is merged back into that corpus
# (-merge=1 keeps only such inputs), ready to commit.
#
# Needs clang and its fuzzer runtime, from Debian's packages:
#   apt-get install -y clang libclang-rt-14-dev
#
# Each run's log is build-fuzz/TARGET.log; a crash, a leak, a failed check or
# an input slower than 10 s stops the script, with the input that caused it
# in build-fuzz/artifacts/. The targets run one after another (libFuzzer
# uses one core); run the script under `nice` to keep the machine usable.
set -e
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's|tests/fuzz/fuzz_||; s|\.c$||')}
make fuzz >/dev/null
mkdir -p build-fuzz/artifacts

for t in $targets; do
    corpus=tests/fuzz/corpus/$t
    found=build-fuzz/found-$t
    log=build-fuzz/$t.log
    rm -rf "$found"
    mkdir -p "$corpus" "$found"
    before=$(ls "$corpus" | wc -l)
    # New inputs go to $found; the committed corpus is only read.
    if ! build-fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/artifacts/"$t"- "$found" "$corpus" >"$log" 2>&1; then
        echo "fuzz_$t: FOUND A PROBLEM, see $log and build-fuzz/artifacts/" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    build-fuzz/fuzz_"$t" -merge=1 "$corpus" "$found" >>"$log" 2>&1
    rm -rf "$found"
    after=$(ls "$corpus" | wc -l)
    # The summary: the run's totals and its final coverage (edges) and features.
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(sed -n 's/^#[0-9]*[[:space:]]*DONE *\(cov: [0-9]* ft: [0-9]*\).*/\1/p' "$log" | head -n 1)
    echo "fuzz_$t: $runs runs in ${seconds}s, $speed exec/s, $cov, corpus $before -> $after files"
done
