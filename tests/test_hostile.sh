#!/bin/sh
# tests/test_hostile.sh - run against hostile input: the committed corpus of
# malformed checkpoints in tests/hostile (made by scripts/make_hostile.py),
# bad flags and bad token ids. Every case must end cleanly: the exit status
# of a runtime error (1) or a usage error (2), nothing on stdout, and one
# line on stderr, "run: ...", that says what is wrong. A crash, a sanitizer
# report (under make test-sanitize $RUN is ./run-san) or a hang (20 s) fails.
# shellcheck disable=SC2086 # $many_ids is a list, split on purpose
. tests/lib.sh

corpus=tests/hostile
base=$corpus/base
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect STATUS TEXT ARG...: run ARG... must fail as described above, with
# exit status STATUS and TEXT in its message.
expect() {
    status=$1
    text=$2
    shift 2
    timeout 20 $RUN "$@" >"$out" 2>"$err"
    got=$?
    if [ "$got" -ne "$status" ]; then
        fail "run $*: exit status $got, expected $status: $(head -c 300 "$err")"
    elif [ -s "$out" ]; then
        fail "run $*: wrote to stdout: $(head -c 300 "$out")"
    elif [ "$(wc -l <"$err")" -ne 1 ] || [ "$(head -c 5 "$err")" != "run: " ]; then
        fail "run $*: stderr is not one line 'run: ...': $(head -c 300 "$err")"
    elif ! grep -qF -- "$text" "$err"; then
        fail "run $*: the message does not say '$text': $(cat "$err")"
    else
        pass
    fi
}

# works ARG...: run ARG... must succeed (the cases' base is a valid checkpoint).
works() {
    if timeout 20 $RUN "$@" >"$out" 2>"$err"; then pass; else fail "run $*: failed: $(head -c 300 "$err")"; fi
}

if [ ! -f "$corpus/cases.txt" ]; then
    fail "$corpus/cases.txt is missing (scripts/make_hostile.py makes it)"
    summary test_hostile
    exit 1
fi

# ---- the base checkpoint works, so each case fails for what it breaks ----

works info "$base"
works fwd "$base" --tokens 1,2,3
works gen "$base" hi -n 2

# ---- every malformed checkpoint, with each command that reads one ----

while IFS='|' read -r name text; do
    expect 1 "$text" info "$corpus/$name" --check
    # Plain info reads no tokenizer.json: the cases that break only it pass.
    case $name in
        tokenizer-* | merge-* | vocab-* | added-*) works info "$corpus/$name" ;;
        *) expect 1 "$text" info "$corpus/$name" ;;
    esac
    expect 1 "$text" fwd "$corpus/$name" --tokens 1,2,3
    expect 1 "$text" gen "$corpus/$name" hi -n 2
done <"$corpus/cases.txt"

# No tokenizer.json: info and fwd run token ids without one, gen cannot.
no_tokenizer=$(mktemp -d)
ln -s "$PWD/$base/config.json" "$PWD/$base/model.safetensors" "$no_tokenizer/"
works info "$no_tokenizer"
works fwd "$no_tokenizer" --tokens 1,2,3
expect 1 "tokenizer.json: No such file or directory" gen "$no_tokenizer" hi -n 2
rm -r "$no_tokenizer"

# JSON files too large to parse safely (sparse files, which take no disk).
for f in config.json tokenizer.json; do
    big=$(mktemp -d)
    ln -s "$PWD/$base/config.json" "$PWD/$base/model.safetensors" "$PWD/$base/tokenizer.json" "$big/"
    rm "$big/$f"
    truncate -s 200M "$big/$f"
    expect 1 "$f: 209715200 bytes, too large for a JSON file run reads (at most 128 MiB)" info "$big" --check
    expect 1 "$f: 209715200 bytes, too large for a JSON file run reads (at most 128 MiB)" gen "$big" hi -n 2
    rm -r "$big"
done

# Well-formed weights that hold NaN: gen must not sample from NaN logits.
works info "$corpus/nan-weights"
expect 1 "the model computed a NaN logit" gen "$corpus/nan-weights" hi -n 2
expect 1 "the model computed a NaN logit" gen "$corpus/nan-weights" hi -n 2 --temp 1

# ---- the command line ----

no_such=$corpus/no-such-model
expect 2 "unknown command 'frobnicate'" frobnicate "$base"
expect 1 "$no_such: no such file or folder" info "$no_such"
expect 1 ": no such file or folder" info ""
expect 1 "$base/config.json: pass the checkpoint folder that holds it, not one of its files" info "$base/config.json"
# A GGUF file, by name or by its magic number, and one shard of several.
other=$(mktemp -d)
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000' >"$other/model.gguf"
expect 1 "$other/model.gguf is a GGUF file (llama.cpp's format), which run does not read" info "$other/model.gguf"
cp "$other/model.gguf" "$other/model.safetensors"
cp "$base/config.json" "$other/"
expect 1 "$other/model.safetensors is a GGUF file (llama.cpp's format)" info "$other/model.safetensors"
"${TESTBIN:-build/tests}/make_checkpoint" "$other/sharded" --shards 2 --set vocab_size=300 >/dev/null
expect 1 "model-00001-of-00002.safetensors is one shard of a sharded checkpoint: pass the folder that holds it" \
    info "$other/sharded/model-00001-of-00002.safetensors"
rm -r "$other"
expect 1 "/dev/config.json: No such file or directory" info /dev/null

# Model flags, as every command takes them.
expect 2 "info: MODEL is missing" info
expect 2 "info: unknown flag '--frob' (see 'run info --help')" info "$base" --frob
expect 2 "info: unknown flag '--x?y'" info "$base" "--x
y"
expect 2 "info: unexpected argument '$base'" info "$base" "$base"
expect 2 "-c needs a value" info "$base" -c
for bad in 0 -5 abc 12x "" 1e3 99999999999999999999 16777217; do
    expect 2 "-c: expected an integer in [1, 16777216], got '$bad'" info "$base" -c "$bad"
done
expect 2 "-t: expected an integer in [1, 1024], got '0'" info "$base" -t 0
expect 2 "-t: expected an integer in [1, 1024], got '100000'" info "$base" -t 100000
expect 2 "--dtype: expected bf16, f16, f32, q8 or q4, got 'q3'" info "$base" --dtype q3
expect 2 "--math: expected exact or bf16, got 'fast'" info "$base" --math fast
expect 2 "--dtype needs a value" info "$base" --dtype
expect 1 "the weights are stored as bf16: they can run as bf16, f32, q8 or q4, not f16" info "$base" --dtype f16
expect 1 "a context of 65 positions is outside [1, 64]" info "$base" -c 65
expect 1 "a context of 16777216 positions is outside [1, 64]" fwd "$base" --tokens 1 -c 16777216

# Token ids for fwd.
expect 2 "fwd: give TOKEN POS, or --tokens" fwd "$base"
expect 2 "fwd: give TOKEN POS, or --tokens" fwd "$base" 5
expect 2 "fwd: give TOKEN POS or --tokens, not both" fwd "$base" 5 0 --tokens 1
expect 2 "--tokens needs a value" fwd "$base" --tokens
for bad in abc 1,,2 ,1 -1 1.5 0x10 "1 x" 1073741825 99999999999999999999; do
    expect 2 "fwd: --tokens: expected token ids separated by spaces or commas, got '$bad'" fwd "$base" --tokens "$bad"
done
expect 2 "fwd: --tokens: no token ids given" fwd "$base" --tokens ""
expect 2 "TOKEN: expected an integer in [0, 1073741824], got 'abc'" fwd "$base" abc 0
expect 2 "fwd: unknown flag '-1'" fwd "$base" 5 -1
expect 1 "token id 272 is outside the vocabulary [0, 272)" fwd "$base" --tokens 272
expect 1 "token id 1000000 is outside the vocabulary [0, 272)" fwd "$base" --tokens 1,2,1000000
expect 1 "token id 272 is outside the vocabulary [0, 272)" fwd "$base" 272 0
expect 1 "the last token's position, 64, is past the context of 64 positions" fwd "$base" 5 64
expect 1 "the last token's position, 1073741824, is past the context of 64 positions" fwd "$base" 5 1073741824
many_ids=$(seq -s, 0 64)
expect 1 "the last token's position, 64, is past the context of 64 positions" fwd "$base" --tokens "$many_ids"
expect 1 "$corpus/no-such-folder/logits: cannot create" fwd "$base" --tokens 1 --logits "$corpus/no-such-folder/logits"

# Generation flags and prompts.
expect 2 "gen: MODEL is missing" gen
expect 2 "gen: unknown flag '--frob'" gen "$base" hi --frob
expect 2 "gen: unexpected argument 'there'" gen "$base" hi there
expect 2 "-n needs a value" gen "$base" hi -n
for bad in -2 abc 1e3 1073741825; do
    expect 2 "-n: expected an integer in [-1, 1073741824], got '$bad'" gen "$base" hi -n "$bad"
done
for bad in nan inf abc ""; do
    expect 2 "--temp: expected a number, got '$bad'" gen "$base" hi --temp "$bad"
done
expect 2 "temperature must be 0 (greedy) or at least 1e-6, got -1" gen "$base" hi --temp -1
expect 2 "temperature must be 0 (greedy) or at least 1e-6, got 1e-09" gen "$base" hi --temp 1e-9
expect 2 "top-p must be in (0, 1] (1 = off), got 0" gen "$base" hi --top-p 0
expect 2 "top-p must be in (0, 1] (1 = off), got 1.5" gen "$base" hi --top-p 1.5
expect 2 "min-p must be in [0, 1] (0 = off), got 2" gen "$base" hi --min-p 2
expect 2 "--top-k: expected an integer in [0, 1073741824], got '-1'" gen "$base" hi --top-k -1
expect 2 "repeat penalty must be > 0 (1 = off), got 0" gen "$base" hi --repeat-penalty 0
for bad in -2 abc 18446744073709551616 9223372036854775808; do
    expect 2 "--seed: expected a non-negative integer, or -1 for a random seed, got '$bad'" gen "$base" hi --seed "$bad"
done
expect 1 "the prompt is empty" gen "$base" ""
expect 1 "the prompt is 6 tokens, longer than the context of 4 positions" gen "$base" "hello world, hello world" -c 4

# bench's own flags.
expect 2 "-p: expected an integer in [0, 1048576], got '-1'" bench "$base" -p -1
expect 2 "-p 0 and -n 0: nothing to time" bench "$base" -p 0 -n 0
expect 1 "a context of 228 positions is outside [1, 64]" bench "$base" --depth 100 -p 128

summary test_hostile
