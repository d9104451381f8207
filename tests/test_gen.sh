#!/bin/sh
# tests/test_gen.sh - gen and chat end to end against the reference's greedy
# continuations (tests/data/generation_golden.json, made by
# scripts/make_golden.py with the numpy reference of transformers' Qwen2), and
# chat's conventions: /reset, a full context, a typed special token, seeds.
. tests/lib.sh

fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/generation_golden.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/model
# shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
"$fixture" "$model" $(field checkpoint) >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"
cp tests/data/templates/qwen2.5.jinja "$model/chat_template.jinja"
n=$(field gen_tokens)

# ---- gen: the reference's greedy continuation, and one newline ----
# (The prompts come on standard input: $(...) would drop a final newline.)
for i in 0 1 2 3 4; do
    field gen $i prompt >"$tmp/prompt"
    field gen $i stdout >"$tmp/want"
    $RUN gen "$model" --temp 0 -n "$n" <"$tmp/prompt" >"$tmp/got" 2>"$tmp/err"
    check "gen prompt $i: exit 0" test $? -eq 0
    check "gen prompt $i: the reference's continuation" cmp -s "$tmp/got" "$tmp/want"
    check "gen prompt $i: the prompt's ids" test "$($RUN tok "$model" -f "$tmp/prompt")" = "$(field gen $i prompt_ids)"
done
n_prompt=$(field gen 4 prompt_ids | wc -w)
check "gen: statistics on stderr" grep -q "^prompt: $n_prompt tokens, .* tok/s; generated: $n tokens, .* tok/s; stopped by the length limit; seed " "$tmp/err"
field gen 1 stdout >"$tmp/want"
$RUN gen "$model" "$(field gen 1 prompt)" --temp 0 -n "$n" >"$tmp/got" 2>/dev/null
check "gen: the prompt as an argument" cmp -s "$tmp/got" "$tmp/want"

# ---- gen: an end token that the continuation reaches ends it unseen ----
eos_model=$tmp/eos-model
# shellcheck disable=SC2046
"$fixture" "$eos_model" $(field checkpoint) --set eos_token_id="$(field eos eos_id)" >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$eos_model/tokenizer.json"
field gen 0 prompt >"$tmp/prompt"
field eos stdout >"$tmp/want"
$RUN gen "$eos_model" --temp 0 -n "$n" <"$tmp/prompt" >"$tmp/got" 2>"$tmp/err"
check "gen: stops at config.json's eos id, printing nothing for it" cmp -s "$tmp/got" "$tmp/want"
check "gen: the statistics say why it stopped" grep -q "generated: $(field eos n_before) tokens.*stopped by an end token" "$tmp/err"

# ---- gen: sampling ----
$RUN gen "$model" "Hello" -n 12 --temp 0.9 --top-k 40 --seed 7 >"$tmp/a" 2>/dev/null
$RUN gen "$model" "Hello" -n 12 --temp 0.9 --top-k 40 --seed 7 -t 1 >"$tmp/b" 2>/dev/null
$RUN gen "$model" "Hello" -n 12 --temp 0.9 --top-k 40 --seed 8 >"$tmp/c" 2>/dev/null
check "gen --seed: the same text again (and with -t 1)" cmp -s "$tmp/a" "$tmp/b"
check "gen --seed: another seed, another text" sh -c "! cmp -s '$tmp/a' '$tmp/c'"
check "gen -n 3: at most 3 tokens" sh -c "$RUN gen '$model' Hello -n 3 2>&1 >/dev/null | grep -q 'generated: 3 tokens'"

# ---- gen: errors ----
$RUN gen "$model" "one two three four five six" -c 4 >/dev/null 2>"$tmp/err"
check "gen: a prompt longer than the context: exit 1" test $? -eq 1
check "gen: a prompt longer than the context: said, with what to do" \
    grep -q "longer than the context of 4 positions: shorten it, or raise -c (the model allows up to 32768)" "$tmp/err"
$RUN gen "$model" "" >/dev/null 2>"$tmp/err"
check "gen: an empty prompt: exit 1" test $? -eq 1
printf 'caf\351 au lait' >"$tmp/latin1"
$RUN gen "$model" "$(cat "$tmp/latin1")" -n 1 >/dev/null 2>"$tmp/err"
check "gen: invalid UTF-8 in the prompt: a warning" grep -q "invalid UTF-8 sequence in the input replaced by U+FFFD" "$tmp/err"

# ---- gen and chat with a KV cache of bf16 ----
$RUN gen "$model" "Hello" -n 8 --temp 0 -ctk bf16 -ctv bf16 >"$tmp/got" 2>"$tmp/err"
check "gen -ctk bf16 -ctv bf16: exit 0, 8 tokens" grep -q "generated: 8 tokens" "$tmp/err"
printf 'hi\nand again\n' | $RUN chat "$model" --temp 0 --seed 0 -n 4 --cache-type-k bf16 --cache-type-v bf16 >"$tmp/got" 2>"$tmp/err"
check "chat --cache-type-k/-v bf16: two replies through a pipe" test $? -eq 0 -a "$(wc -l <"$tmp/got")" -eq 2

# ---- chat: two turns through a pipe, against the reference ----
{
    field chat messages 0
    echo
    field chat messages 1
    echo
} >"$tmp/messages"
field chat stdout >"$tmp/want"
$RUN chat "$model" --temp 0 --seed 0 -n "$(field chat_tokens)" <"$tmp/messages" >"$tmp/got" 2>"$tmp/err"
check "chat: exit 0 at the end of input" test $? -eq 0
check "chat: two replies as the reference, each ending in a newline" cmp -s "$tmp/got" "$tmp/want"
check "chat: only the seed on stderr when piped" test "$(cat "$tmp/err")" = "seed 0"

# template: the text transformers renders (jinja2), and tokens that are the
# ones chat feeds for the same conversation (the reference's ids above).
python3 -c '
import json, sys
print(json.dumps({"messages": json.load(open(sys.argv[1]))["chat"]["conversation"], "add_generation_prompt": True}))' \
    "$golden" >"$tmp/conversation.json"
$RUN template "$model" -f "$tmp/conversation.json" >"$tmp/rendered" 2>"$tmp/err"
check "template: exit 0" test $? -eq 0
field chat turn_texts 1 >"$tmp/want_text"
check "template: jinja2's text for a conversation" cmp -s "$tmp/rendered" "$tmp/want_text"
check "template: tok of its text is the ids of chat's second turn" \
    test "$($RUN tok "$model" --no-special -f "$tmp/rendered")" = "$(field chat turn_ids 1)"
$RUN template "$model" --generation-prompt <"$tmp/conversation.json" >"$tmp/again" 2>/dev/null
check "template: from standard input, the flag as the JSON's add_generation_prompt" cmp -s "$tmp/again" "$tmp/want_text"
printf '[{"role": "user", "content": "hi"}]' | $RUN template "$model" >"$tmp/got"
check "template: a bare list of messages, without the generation prompt" \
    test "$(cat "$tmp/got")" = "$(field chat turn_texts 0 | sed '$d')"
printf '{"messages": 5}' | $RUN template "$model" >/dev/null 2>"$tmp/err"
check "template: a conversation that is not one is refused" grep -q "must be a list of messages" "$tmp/err"
no_template=$tmp/no-template
mkdir "$no_template"
cp "$model/config.json" "$model/model.safetensors" "$model/tokenizer.json" "$no_template/"
printf 'hi\n' | $RUN chat "$no_template" >/dev/null 2>"$tmp/err"
check "chat: a checkpoint without a chat template: exit 1" test $? -eq 1
check "chat: ... says it has no chat template" grep -q "no chat template" "$tmp/err"

# /reset: the second conversation starts afresh, so its reply is the first's.
first=$(head -n 1 "$tmp/want")
printf '%s\n/reset\n%s\n/exit\nnever read\n' "$(field chat messages 0)" "$(field chat messages 0)" |
    $RUN chat "$model" --temp 0 -n "$(field chat_tokens)" >"$tmp/got" 2>/dev/null
check "chat /reset: the same reply to the same first message" test "$(sed -n 2p "$tmp/got")" = "$first"
check "chat /exit: nothing after it is read" test "$(wc -l <"$tmp/got")" -eq 2

# A context too small for two turns: the first turn is dropped.
printf 'hi\nhi\n' | $RUN chat "$model" --temp 0 -n 8 -c 48 >"$tmp/got" 2>"$tmp/err"
check "chat: a full context drops the oldest messages" grep -q "the context is full: the oldest 2 messages were dropped" "$tmp/err"
check "chat: ... and answers as in a new conversation" test "$(sed -n 2p "$tmp/got")" = "$first"
printf '%s\n' "$(head -c 3000 /dev/zero | tr '\0' 'a')" | $RUN chat "$model" -c 64 >/dev/null 2>"$tmp/err"
check "chat: a message longer than the context is refused, saying what to do, chat goes on" \
    grep -q "longer than the context of 64 positions: shorten it, or start chat again with a larger -c" "$tmp/err"
printf '' | $RUN chat "$model" >"$tmp/got" 2>/dev/null
check "chat: empty input ends at once" test ! -s "$tmp/got"

summary test_gen
