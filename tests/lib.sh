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

# status EXPECTED COMMAND...: runs COMMAND, output to $tmp/out and $tmp/err
# (the test's own $tmp folder), and checks its exit status.
status() {
    want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    [ "$got" -eq "$want" ] || { echo "exit $got, expected $want: $*"; cat "$tmp/err"; return 1; }
}

# one_error PATTERN: stderr ($tmp/err) is a single line "run: ..." matching PATTERN.
one_error() {
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && head -n 1 "$tmp/err" | grep -q "^run: .*$1" ||
        { echo "stderr is not one line matching '$1':"; cat "$tmp/err"; return 1; }
}

summary() {
    echo "$1: $n_passed passed, $n_failed failed"
    [ "$n_failed" -eq 0 ]
}

# field KEY...: a value of the JSON file $golden (which the test sets), e.g.
# field gen 0 prompt; a list prints as its items separated by spaces.
field() {
    python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
sys.stdout.write(v if isinstance(v, str) else " ".join(map(str, v)) if isinstance(v, list) else str(v))' "$golden" "$@"
}

# qwen_fixture KEY: a scratch folder $tmp, removed on exit, and in it $model,
# the random-weight checkpoint of tests/make_checkpoint that field KEY of
# $golden gives the flags of, with the real Qwen2.5 tokenizer and chat
# template beside it.
qwen_fixture() {
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    model=$tmp/model
    # shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
    "${TESTBIN:-build/tests}/make_checkpoint" "$model" $(field "$1") >/dev/null
    cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"
    cp tests/data/templates/qwen2.5.jinja "$model/chat_template.jinja"
}
