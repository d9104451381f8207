#!/bin/sh
# tests/test_page.sh - the chat page of `run serve` (GET /, chat_page.html):
# its header in step with it, then the page in Debian's Chromium driven by
# puppeteer-core (tests/browser/test.mjs: a streamed reply equal to the
# API's and the reference's, Stop freeing the slot, conversations kept over
# a reload, hostile text shown as text, the API key asked for) on
# test_gen.sh's checkpoint (tests/data/generation_golden.json). Needs
# chromium, node and `npm ci --prefix tests/browser` (scripts/setup.sh
# --tests): without them this test FAILS (it does not skip), saying so.
. tests/lib.sh

client=tests/browser
fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/generation_golden.json
check "report_page.h and chat_page.h are what scripts/embed_page.py makes of their pages" python3 scripts/embed_page.py --check
if ! command -v chromium >/dev/null || ! command -v node >/dev/null || [ ! -d "$client/node_modules/puppeteer-core" ]; then
    fail "chromium, node or puppeteer-core is missing: run scripts/setup.sh --tests (npm ci --prefix $client)"
    summary tests/test_page.sh
    exit 1
fi
tmp=$(mktemp -d)
model=$tmp/model
# shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
"$fixture" "$model" $(field checkpoint) >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"
cp tests/data/templates/qwen2.5.jinja "$model/chat_template.jinja"
$RUN serve "$model" --port 0 -c 4096 --parallel 2 2>"$tmp/open.log" &
open_pid=$!
$RUN serve "$model" --port 0 -c 256 --api-key k3y 2>"$tmp/keyed.log" &
keyed_pid=$!
trap 'kill $open_pid $keyed_pid 2>/dev/null; rm -rf "$tmp"' EXIT

# port LOG: the port a server says it listens on.
port() {
    for _ in $(seq 200); do
        p=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$1")
        [ -n "$p" ] && echo "$p" && return
        sleep 0.05
    done
}
open_port=$(port "$tmp/open.log")
keyed_port=$(port "$tmp/keyed.log")
want=$(field chat stdout | head -n 1)
node "$client/test.mjs" "$open_port" "$keyed_port" k3y "$want" "$(field chat_tokens)" "$tmp/open.log" "$tmp" >"$tmp/out" 2>&1
status=$?
grep '^FAIL' "$tmp/out"
check "the browser's checks: exit 0 (see above)" test "$status" -eq 0
check "the browser's checks ran" test "$(grep -c '^ok' "$tmp/out")" -eq 31
[ "$status" -eq 0 ] || cat "$tmp/out"
for pid in $open_pid $keyed_pid; do
    kill -TERM "$pid"
    wait "$pid"
    check "SIGTERM: exit 0" test $? -eq 0
done
check "no sanitizer report" sh -c "! grep -q 'Sanitizer\|runtime error' '$tmp/open.log' '$tmp/keyed.log'"
summary tests/test_page.sh
