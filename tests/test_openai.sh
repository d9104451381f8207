#!/bin/sh
# tests/test_openai.sh - `run serve` driven by the official openai npm
# package (tests/openai_client), streaming included, on test_gen.sh's
# checkpoint; the chat reply must be the reference's (generation_golden.json),
# the embeddings the reference's vectors (embed_golden.json); tool calls and
# zodResponseFormat replies must be what zod accepts.
# Needs node and `npm ci --prefix tests/openai_client` first: without them
# this test FAILS (it does not skip), saying so.
. tests/lib.sh

client=tests/openai_client
fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/generation_golden.json
if ! command -v node >/dev/null || [ ! -d "$client/node_modules/openai" ]; then
    fail "the openai npm package is missing: run 'npm ci --prefix $client' (and install node)"
    summary tests/test_openai.sh
    exit 1
fi
tmp=$(mktemp -d)
model=$tmp/model
# shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
"$fixture" "$model" $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$golden") >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"
cp tests/data/templates/qwen2.5.jinja "$model/chat_template.jinja"
$RUN serve "$model" --port 0 -c 1024 --api-key k3y 2>"$tmp/log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
port=
for _ in $(seq 200); do
    port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/log")
    [ -n "$port" ] && break
    sleep 0.05
done
want=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["chat"]["stdout"].split("\n")[0])' "$golden")
n=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["chat_tokens"])' "$golden")
node "$client/test.mjs" "$port" "$want" "$n" tests/data/embed_golden.json >"$tmp/out" 2>&1
status=$?
grep '^FAIL' "$tmp/out"
check "the openai client's checks: exit 0 (see above)" test "$status" -eq 0
check "the openai client's checks ran" test "$(grep -c '^ok' "$tmp/out")" -eq 18
[ "$status" -eq 0 ] || cat "$tmp/out"
kill -TERM $pid
wait $pid
check "SIGTERM: exit 0" test $? -eq 0
check "no sanitizer report" sh -c "! grep -q 'Sanitizer\|runtime error' '$tmp/log'"
summary tests/test_openai.sh
