#!/bin/sh
# tests/run_tests.sh - runs the test programs and scripts on the kernel paths
# this CPU has (plain C, AVX2, AVX-512: RUN_KERNELS selects one), so that no
# path can hide a bug, then prints the total as its last line:
# "N passed, N failed". test_kernels goes over every path itself: it runs
# once (on AVX-512 CPUs once for each way of bf16 arithmetic, RUN_BF16_DOT).
# The forward-pass test (test_net) runs on every path (and on AVX-512 with
# both ways of bf16 arithmetic); the whole suite on the FULL_PATHS.
#   TESTBIN:    folder of the built tests/test_* programs (default build/tests)
#   RUN:        the run binary the end-to-end scripts use (default ./run)
#   FULL_PATHS: the paths the whole suite runs on, "best" naming the CPU's
#               best path, the one run chooses by itself (default: "best plain")
TESTBIN=${TESTBIN:-build/tests}
export RUN=${RUN:-./run}
total_passed=0
total_failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

count() {  # count NAME STATUS: add up the summary line in $log
    line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ] || { [ "$2" -ne 0 ] && ! echo "$line" | grep -q ' [1-9][0-9]* failed$'; }; then
        echo "FAIL $1 ended with status $2 without a complete summary"
        total_failed=$((total_failed + 1))
        [ -n "$line" ] || return
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
}

report() {  # report NAME STATUS: show failures and sanitizer findings, then count
    grep -E '^FAIL|Sanitizer|runtime error' "$log"
    grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$log"
    count "$1" "$2"
}

paths=$("$TESTBIN"/test_kernels --paths)
if [ -z "$paths" ]; then
    echo "FAIL $TESTBIN/test_kernels --paths listed no kernel path"
    total_failed=$((total_failed + 1))
fi
best=$(echo $paths | awk '{ print $NF }')
has_avx512=false
echo " " $paths " " | grep -q " avx512 " && has_avx512=true
# test_kernels tests every path this CPU runs, whatever RUN_KERNELS says.
if $has_avx512; then dots="instruction fma"; else dots=measured; fi
for dot in $dots; do
    echo "test_kernels, every kernel path$($has_avx512 && echo ", bf16 arithmetic by $dot"):"
    if $has_avx512; then RUN_BF16_DOT=$dot "$TESTBIN"/test_kernels >"$log" 2>&1; else "$TESTBIN"/test_kernels >"$log" 2>&1; fi
    report "$TESTBIN"/test_kernels "$?"
done
full_paths=$(echo "${FULL_PATHS:-best plain}" | sed "s/best/$best/")
for path in $paths; do
    export RUN_KERNELS=$path
    whole=false
    for p in $full_paths; do [ "$p" = "$path" ] && whole=true; done
    echo "kernel path $path ($($whole && echo "the whole suite" || echo "the forward-pass test")):"
    for t in "$TESTBIN"/test_*; do
        [ -x "$t" ] || continue
        case $t in */test_kernels) continue ;; */test_net) ;; *) $whole || continue ;; esac
        "$t" >"$log" 2>&1
        status=$?
        report "$t" "$status"
    done
    $whole || continue
    for t in tests/test_*.sh; do
        [ -f "$t" ] || continue
        sh "$t" >"$log" 2>&1
        report "$t" "$?"
    done
done
# The AVX-512 path does bf16 arithmetic with the BF16 dot product or with
# FMAs, whichever this CPU runs faster: the forward-pass test runs with each.
if $has_avx512; then
    for dot in instruction fma; do
        echo "kernel path avx512, bf16 arithmetic by $dot (the forward-pass test):"
        RUN_KERNELS=avx512 RUN_BF16_DOT=$dot "$TESTBIN"/test_net >"$log" 2>&1
        report "$TESTBIN"/test_net "$?"
    done
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
