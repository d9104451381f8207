# tests/lib.sh - the shell tests' harness, sourced by tests/test_*.sh:
# pass/fail counting and the same closing line as the C tests.
n_passed=0
n_failed=0
RUN=${RUN:-./run}

pass() { n_passed=$((n_passed + 1)); }
fail() { n_failed=$((n_failed + 1)); echo "FAIL $*"; }

# check "description" command...: passes when the command exits 0.
check() {
    what=$1
    shift
    if "$@"; then pass; else fail "$what"; fi
}

summary() {
    echo "$1: $n_passed passed, $n_failed failed"
    [ "$n_failed" -eq 0 ]
}
