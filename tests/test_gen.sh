#!/bin/sh
# tests/test_gen.sh - gen and chat end to end against the reference's greedy
# continuations (tests/data/generation_golden.json, made by
# scripts/make_golden.py with the numpy reference of transformers' Qwen2), and
# chat's conventions: /reset, a full context, a typed special token, seeds.
. tests/lib.sh

fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/generation_golden.json
qwen_fixture checkpoint
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
check "gen: statistics on stderr (greedy: no seed)" \
    grep -q "^prompt: $n_prompt tokens, .* tok/s; generated: $n tokens, .* tok/s; stopped by the length limit$" "$tmp/err"
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
check "gen --seed 7: the seed in the statistics" sh -c "$RUN gen '$model' Hello -n 1 --temp 0.9 --seed 7 2>&1 >/dev/null | grep -q '; seed 7$'"

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
check "chat: nothing on stderr when piped and greedy (no seed to show)" test ! -s "$tmp/err"
printf 'hi\n' | $RUN chat "$model" --temp 0.8 --seed 5 -n 2 >/dev/null 2>"$tmp/err"
check "chat: the seed on stderr when piped and sampling" test "$(cat "$tmp/err")" = "seed 5"

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

# ---- the flags llama.cpp users reach for ----
field gen 0 prompt >"$tmp/prompt0"
field gen 0 stdout >"$tmp/want0"
field gen 1 prompt >"$tmp/prompt1"
field gen 1 stdout >"$tmp/want1"

# -m/--model: the model anywhere, in every command.
$RUN gen -m "$model" "$(field gen 1 prompt)" --temp 0 -n "$n" >"$tmp/got" 2>/dev/null
check "gen -m MODEL PROMPT: the reference's continuation" cmp -s "$tmp/got" "$tmp/want1"
$RUN gen "$(field gen 1 prompt)" --temp 0 -n "$n" --model="$model" >"$tmp/got" 2>/dev/null
check "gen PROMPT --model=MODEL: the same" cmp -s "$tmp/got" "$tmp/want1"
check "info -m: exit 0" status 0 $RUN info -m "$model"
check "info -m: the model" grep -q "^model: $model$" "$tmp/out"
check "tok -m: the reference's ids" test "$($RUN tok -f "$tmp/prompt1" -m "$model")" = "$(field gen 1 prompt_ids)"
# shellcheck disable=SC2046 # the ids are separate arguments
$RUN detok -m "$model" $(field gen 1 prompt_ids) >"$tmp/got"
check "detok -m: the prompt back" cmp -s "$tmp/got" "$tmp/prompt1"
$RUN fwd --model "$model" --tokens "$(field gen 1 prompt_ids)" -c 64 >"$tmp/got" 2>/dev/null
check "fwd --model: the reference's next token first" grep -q "^  1\. id $(field gen 1 reply_ids | cut -d' ' -f1) " "$tmp/got"
$RUN ppl "$model" tests/data/ppl_text.txt -c 16 >"$tmp/a" 2>/dev/null
$RUN ppl -m "$model" -c 16 -f tests/data/ppl_text.txt >"$tmp/b" 2>/dev/null
check "ppl -m MODEL -f FILE: as ppl MODEL FILE" sh -c "grep -q '^perplexity: ' '$tmp/a' && cmp -s '$tmp/a' '$tmp/b'"
check "ppl: FILE and -f FILE: refused" status 2 $RUN ppl "$model" tests/data/ppl_text.txt -f tests/data/ppl_text.txt
check "ppl: ... one line" one_error "two files given"
check "bench -m: exit 0" status 0 $RUN bench -m "$model" -p 4 -n 2 -r 1
check "bench -m: the tg line" grep -q "^tg2: " "$tmp/out"
check "prepare -m: exit 0" status 0 $RUN prepare -m "$model"
check "-m twice: refused" status 2 $RUN info -m "$model" -m "$model"
check "-m twice: one line" one_error "the model is given twice"
check "no model: refused" status 2 $RUN gen --temp 0
check "no model: says how to give it" one_error "MODEL is missing (the first argument, or -m MODEL)"
check "gen MODEL PROMPT -p TEXT: refused" status 2 $RUN gen "$model" "Hi" -p "there"
check "gen MODEL PROMPT -p TEXT: one line" one_error "two prompts given: give one"
check "gen -p twice: refused" status 2 $RUN gen "$model" -p "Hi" -p "there"

# -e: the escapes of the prompt read as the characters they stand for.
field gen 3 stdout >"$tmp/want3"
escaped=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["gen"][3]["prompt"].replace("\\", "\\\\").replace("\n", "\\n").replace("\"", "\\\""))' "$golden")
$RUN gen "$model" -e "$escaped" --temp 0 -n "$n" >"$tmp/got" 2>/dev/null
check "gen -e: a prompt of \\n and \\\" as the reference's" cmp -s "$tmp/got" "$tmp/want3"
$RUN gen "$model" --escape 'Hello\x20world' --temp 0 -n "$n" >"$tmp/got" 2>/dev/null
check "gen -e: \\x20 is a space" cmp -s "$tmp/got" "$tmp/want0"
$RUN gen "$model" 'Hello\x20world' --temp 0 -n "$n" >"$tmp/got" 2>/dev/null
check "gen without -e: \\x20 is four characters" sh -c "! cmp -s '$tmp/got' '$tmp/want0'"

# -r/--reverse-prompt and --stop (repeatable): the text ends before the
# first place one of them appears; a piece from the middle of the reply.
python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["gen"][int(sys.argv[2])]["stdout"][:-1]
for start in range(len(t) // 2, len(t)):
    stop = t[start:start + 3]
    if t.find(stop) == start and stop.strip():
        break
open(sys.argv[3], "w").write(stop)
open(sys.argv[4], "w").write(t[:start] + "\n")' "$golden" 1 "$tmp/stop1" "$tmp/cut1"
$RUN gen "$model" "$(field gen 1 prompt)" --temp 0 -n "$n" -r "never appears" --stop "$(cat "$tmp/stop1")" >"$tmp/got" 2>"$tmp/err"
check "gen -r/--stop: the text before the stop string" cmp -s "$tmp/got" "$tmp/cut1"
check "gen -r/--stop: stopped by it" grep -q "stopped by a stop string" "$tmp/err"
$RUN gen "$model" "$(field gen 1 prompt)" --temp 0 -n "$n" --reverse-prompt "$(cat "$tmp/stop1")" >"$tmp/got" 2>/dev/null
check "gen --reverse-prompt: the same" cmp -s "$tmp/got" "$tmp/cut1"
check "gen: five stop strings: refused" status 2 $RUN gen "$model" hi -r a -r b -r c -r d -r e
check "gen: an empty stop string: refused" status 2 $RUN gen "$model" hi --stop ""
check "gen -e: a stop string made empty: refused" status 2 $RUN gen "$model" hi -e --stop '\x00'

# --ignore-eos: the end token the continuation reaches is never sampled.
field eos stdout >"$tmp/want"
$RUN gen "$eos_model" "$(field gen 0 prompt)" --temp 0 -n "$n" --ignore-eos >"$tmp/got" 2>"$tmp/err"
check "gen --ignore-eos: past the end token, to the length limit" grep -q "generated: $n tokens.*stopped by the length limit" "$tmp/err"
check "gen --ignore-eos: the text before it as without the flag" \
    test "$(head -c "$(($(wc -c <"$tmp/want") - 1))" "$tmp/got")" = "$(cat "$tmp/want")"

# -sys/--system-prompt: the system message the template writes first (the
# first token's position is the length of that prompt, as template and tok
# count it).
printf '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]' |
    $RUN template "$model" --generation-prompt >"$tmp/rendered"
p=$($RUN tok "$model" --no-special -f "$tmp/rendered" | wc -w)
for flag in -sys --system-prompt --system; do
    printf 'hi\n' | $RUN chat "$model" $flag "Be brief." --temp 0 -n 1 -v >/dev/null 2>"$tmp/err"
    check "chat $flag: the system message in the prompt ($p tokens)" grep -q "^pos  *$p  *token " "$tmp/err"
done
printf 'hi\n' | $RUN chat "$model" -e -sys 'Be\x20brief.' --temp 0 -n 1 -v >/dev/null 2>"$tmp/err"
check "chat -e -sys: the escapes read" grep -q "^pos  *$p  *token " "$tmp/err"

# --chat-template-file: a template that writes the messages' text alone
# makes chat's prompt gen's, so the reply is the reference's continuation.
printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$tmp/plain.jinja"
field gen 0 prompt | $RUN chat "$model" --chat-template-file "$tmp/plain.jinja" --temp 0 -n "$n" >"$tmp/got" 2>"$tmp/err"
check "chat --chat-template-file: the reply to the template's text" cmp -s "$tmp/got" "$tmp/want0"
printf '[{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]' |
    $RUN template -m "$model" --chat-template-file "$tmp/plain.jinja" >"$tmp/got"
check "template --chat-template-file: the file's text" test "$(cat "$tmp/got")" = "onetwo"
check "chat --chat-template-file missing: exit 1" status 1 $RUN chat "$model" --chat-template-file "$tmp/none.jinja"
check "chat --chat-template-file missing: named" one_error "none.jinja"
# chat's stop strings, with the same template.
python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["gen"][0]["stdout"][:-1]
for start in range(len(t) // 2, len(t)):
    stop = t[start:start + 2]
    if t.find(stop) == start and stop.strip():
        break
open(sys.argv[2], "w").write(stop)
open(sys.argv[3], "w").write(t[:start] + "\n")' "$golden" "$tmp/stop0" "$tmp/cut0"
field gen 0 prompt | $RUN chat "$model" --chat-template-file "$tmp/plain.jinja" --temp 0 -n "$n" \
    --stop "$(cat "$tmp/stop0")" >"$tmp/got" 2>/dev/null
check "chat --stop: the reply before the stop string" cmp -s "$tmp/got" "$tmp/cut0"

# serve: -m, --chat-template-file, one slot said as such; its help lists
# only what it honours, and gen's and chat's own flags are refused.
$RUN serve -m "$model" --port 0 --parallel 1 -c 64 --chat-template-file "$tmp/plain.jinja" 2>"$tmp/serve.log" &
server=$!
for _ in $(seq 300); do grep -q "listening on" "$tmp/serve.log" && break; sleep 0.1; done
check "serve --parallel 1: '1 slot'" grep -q "(1 slot of 64 tokens)" "$tmp/serve.log"
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/serve.log")
python3 -c 'import json, sys, urllib.request
body = json.dumps({"messages": [{"role": "user", "content": sys.argv[2]}], "max_tokens": int(sys.argv[3]), "temperature": 0})
r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:" + sys.argv[1] + "/v1/chat/completions", body.encode(),
                                                  {"Content-Type": "application/json"}), timeout=60)
sys.stdout.write(json.load(r)["choices"][0]["message"]["content"] + "\n")' "$port" "$(field gen 0 prompt)" "$n" >"$tmp/got" 2>&1
check "serve -m --chat-template-file: the reply to the template's text" cmp -s "$tmp/got" "$tmp/want0"
kill "$server"
wait "$server"
check "serve: stopped cleanly, no sanitizer report" sh -c "! grep -q 'Sanitizer\|runtime error' '$tmp/serve.log'"
$RUN serve --help >"$tmp/help"
for flag in -v -vv --report --grammar -j -r --stop -e; do
    check "serve --help does not list $flag" sh -c "! grep -qe '^  $flag[ ,]' '$tmp/help'"
    check "serve $flag: refused" status 2 $RUN serve "$model" "$flag" x
    check "serve $flag: says it is for gen and chat" one_error "is not available with serve: it is for gen and chat"
done
for flag in --ignore-eos --chat-template-file -m --temp; do
    check "serve --help lists $flag" grep -qe "^  $flag[ ,]" "$tmp/help"
done

summary test_gen
