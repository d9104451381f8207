#!/bin/sh
# tests/run_tests.sh - runs every test program and script, then prints the
# total as its last line: "N passed, N failed".
#   TESTBIN: folder of the built tests/test_* programs (default build/tests)
#   RUN:     the run binary the end-to-end scripts use (default ./run)
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

for t in "$TESTBIN"/test_*; do
    [ -x "$t" ] || continue
    "$t" >"$log" 2>&1
    status=$?
    report "$t" "$status"
done
for t in tests/test_*.sh; do
    [ -f "$t" ] || continue
    sh "$t" >"$log" 2>&1
    report "$t" "$?"
done
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
