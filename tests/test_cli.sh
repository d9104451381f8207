#!/bin/sh
# tests/test_cli.sh - the command line end to end: usage and exit statuses,
# info, fwd, bench, the KV cache's types, and the errors a user can run into.
. tests/lib.sh

fixture=${TESTBIN:-build/tests}/make_checkpoint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/model
"$fixture" "$model" --seed 3 --set vocab_size=1000 --set bos_token_id=1 --set eos_token_id=2 >/dev/null
# A tokenizer.json is checked when present: the hostile corpus's tiny one
# fits this vocabulary (272 ids).
cp tests/hostile/base/tokenizer.json "$model/"

# ---- usage ----
check "no arguments: usage, exit 2" status 2 $RUN
check "no arguments: usage lists the commands" grep -q "bench" "$tmp/err"
check "--help: exit 0" status 0 $RUN --help
for cmd in info fwd gen chat bench tok detok; do
    check "--help lists $cmd" grep -q "^  $cmd " "$tmp/out"
done
for cmd in info fwd gen chat bench tok detok; do
    check "$cmd --help: exit 0" status 0 $RUN $cmd --help
    check "$cmd --help: prints a usage line" grep -q "^usage: run $cmd" "$tmp/out"
done
check "unknown command: exit 2" status 2 $RUN frobnicate
check "unknown command: named" grep -q "unknown command 'frobnicate'" "$tmp/err"
check "unknown flag: exit 2" status 2 $RUN info "$model" --frob
check "bad -c value: exit 2" status 2 $RUN fwd "$model" 1 0 -c abc
check "bad -c value: one line" one_error "-c: expected an integer"
check "-t 0: exit 2" status 2 $RUN fwd "$model" 1 0 -t 0
check "bad --dtype: exit 2" status 2 $RUN fwd "$model" 1 0 --dtype int4
check "fwd without tokens: exit 2" status 2 $RUN fwd "$model"
check "bad --tokens list: exit 2" status 2 $RUN fwd "$model" --tokens 1,,2
check "gen --temp -1: exit 2" status 2 $RUN gen "$model" hi --temp -1
check "gen --top-p 2: exit 2" status 2 $RUN gen "$model" hi --top-p 2
check "gen --seed -5: exit 2" status 2 $RUN gen "$model" hi --seed -5

# ---- info ----
check "info: exit 0" status 0 $RUN info "$model"
# Parameters of the default shape (hidden 64, MLP 176, 4 heads of 16, 2 KV
# heads, 2 layers, vocab 1000, tied), counted by hand:
#   embedding 1000*64 = 64000; per layer: q 64*64+64, k 32*64+32, v 32*64+32,
#   o 64*64, gate/up/down 3*176*64, norms 2*64 = 46336; final norm 64.
check "info: parameter count" grep -q "^parameters: 156736 " "$tmp/out"
check "info: every tensor listed" test "$(grep -c "^  model\." "$tmp/out")" -eq 26
check "info: a tensor's shape and bytes" grep -q "model.embed_tokens.weight  *BF16 \[1000, 64\]  *128000 bytes" "$tmp/out"
check "info: the KV cache at -c 100" sh -c "$RUN info '$model' -c 100 | grep -q 'KV cache 0.1 MB (context 100'"
check "info on a .safetensors file" status 0 $RUN info "$model/model.safetensors"
# A mixture of experts (3 layers of hidden 64, q 128 and k/v 64 wide, 8
# experts of width 48 of which 2 per token, layer 1 dense of width 176,
# vocabulary 2048, tied), counted by hand: matrices 2048*64 + 3*(128*64 +
# 2*64*64 + 64*128) + 2*(8*64 + 8*3*48*64) + 3*176*64 = 387072 parameters,
# of which 2 layers x 6 experts x 3*48*64 are not chosen: 276480 active.
# Read per token in bf16 (16-row groups, the router's 8 rows padded to 16):
# head 262144 + attention 3*49152 + 2*(router 2048 + 2 experts * 18432) +
# dense MLP 3*22528 = 555008 bytes.
moe=$tmp/moe
"$fixture" "$moe" --seed 3 --set model_type='"qwen3_moe"' --set vocab_size=2048 --set head_dim=32 \
    --set num_experts=8 --set num_experts_per_tok=2 --set moe_intermediate_size=48 --set mlp_only_layers='[1]' --set num_hidden_layers=3
check "info on a mixture of experts: exit 0" status 0 $RUN info "$moe"
check "info: the experts" grep -q "^experts: 8 per sparse layer (2 of 3 layers), 2 chosen per token, width 48" "$tmp/out"
check "info: active parameters" grep -q "^parameters per token: 276480 active of 387072 in the matrices" "$tmp/out"
check "info: bytes read per token" grep -q "^read per decoded token: 555008 bytes of weights" "$tmp/out"
check "info: every format" test "$(grep -cE '^  (bf16|f32|q8|q4) +[0-9.]+ MB +[0-9.]+ MB$' "$tmp/out")" -eq 4
# info reads no tokenizer.json (parsing one takes longer than the rest);
# --check loads it and checks it against the model, as download.sh wants.
check "info: exit 0 (the model with a tokenizer)" status 0 $RUN info "$model"
check "info: the tokenizer file, not read" grep -q "^tokenizer: tokenizer.json, 0.0 MB (not read; --check reads it)$" "$tmp/out"
check "info --check: exit 0" status 0 $RUN info "$model" --check
check "info --check: the tokenizer's ids (the corpus tokenizer's 272)" grep -q "^tokenizer: 272 ids, checked against the model$" "$tmp/out"
broken=$tmp/broken-tokenizer
mkdir "$broken"
ln -s "$model/config.json" "$model/model.safetensors" "$broken/"
printf '{"model": ' >"$broken/tokenizer.json"
check "info on a broken tokenizer.json: exit 0 (not read)" status 0 $RUN info "$broken"
check "info --check on a broken tokenizer.json: exit 1" status 1 $RUN info --check "$broken"
check "info --check on a broken tokenizer.json: one line naming it" one_error "tokenizer.json"
check "info on a missing folder: exit 1" status 1 $RUN info "$tmp/nothing"
check "info on a missing folder: one line" one_error "nothing: no such file or folder"

# ---- fwd ----
check "fwd TOKEN POS: exit 0" status 0 $RUN fwd "$model" 5 0
check "fwd: five next tokens" test "$(grep -c '^  [1-5]\. id' "$tmp/out")" -eq 5
check "fwd --logits: exit 0" status 0 $RUN fwd "$model" --tokens 5,6,7 --logits "$tmp/logits"
check "fwd --logits: 3 x 1000 floats" test "$(wc -c <"$tmp/logits")" -eq 12000
# The top token printed is the argmax of the last row written.
top=$(sed -n 's/^  1\. id \([0-9]*\) .*/\1/p' "$tmp/out")
argmax=$(python3 -c "
import struct, sys
v = struct.unpack('<3000f', open(sys.argv[1], 'rb').read())[2000:]
print(max(range(1000), key=lambda i: v[i]))" "$tmp/logits")
check "fwd: the top token is the argmax of the logits file" test "$top" = "$argmax"
# Over more tokens than one forward pass takes (300, in blocks of 128): every
# row written is the reference's (tests/data/forward_golden.json, made by
# scripts/make_golden.py with the numpy reference), at every 10th position.
golden=tests/data/forward_golden.json
long=$tmp/long
python3 -c 'import json, sys
c = [c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == "mistral-long-ring"][0]
open(sys.argv[2], "w").write(c["args"])
open(sys.argv[3], "w").write(",".join(map(str, c["tokens"])))' "$golden" "$tmp/long_args" "$tmp/long_ids"
eval "\"$fixture\" \"$long\" $(cat "$tmp/long_args")" >/dev/null
check "fwd --logits, 300 tokens: exit 0" status 0 $RUN fwd "$long" --tokens "$(cat "$tmp/long_ids")" --logits "$tmp/logits"
check "fwd --logits, 300 tokens: every 10th row the reference's within 1e-4" python3 -c 'import json, struct, sys
c = [c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == "mistral-long-ring"][0]
data = open(sys.argv[2], "rb").read()
vocab = len(data) // 4 // len(c["tokens"])
worst = 0
for k, want in enumerate(c["positions"]):
    p = k * c["every"]
    row = struct.unpack_from("<%df" % vocab, data, 4 * p * vocab)
    worst = max([worst] + [abs(row[i] - w) / want["max_abs"] for i, w in zip(c["sample_ids"], want["logits"])])
    assert max(range(vocab), key=lambda i: row[i]) == want["argmax"], p
assert len(data) == 4 * vocab * 300 and worst <= 1e-4, worst' "$golden" "$tmp/logits"
check "fwd -v traces every layer" sh -c "$RUN fwd '$model' 5 0 -v | grep -c '^layer  [01] x+mlp' | grep -q 2"
check "fwd: token outside the vocabulary: exit 1" status 1 $RUN fwd "$model" --tokens 5,1000
check "fwd: token outside the vocabulary: one line" one_error "token id 1000 is outside the vocabulary"
check "fwd: position past the context: exit 1" status 1 $RUN fwd "$model" 5 200 -c 100
check "fwd: position past the context: one line" one_error "position, 200, is past the context of 100 positions"
check "fwd: context above max_position_embeddings: exit 1" status 1 $RUN fwd "$model" 5 0 -c 99999
check "fwd --logits to a missing folder: exit 1" status 1 $RUN fwd "$model" --tokens 5 --logits "$tmp/no/such/file"

# ---- bench ----
check "bench: exit 0" status 0 $RUN bench "$model" -p 8 -n 4 -r 1
check "bench: pp line" sh -c "tail -n 2 '$tmp/out' | head -n 1 | grep -Eq '^pp8: [0-9]+\.[0-9] tok/s$'"
check "bench: tg line last" sh -c "tail -n 1 '$tmp/out' | grep -Eq '^tg4: [0-9]+\.[0-9] tok/s$'"

# ---- the KV cache's types ----
# The moe checkpoint: 3 layers, 2 key/value heads of 32. At -c 4096, by hand:
# 3 x 2 x 4096 = 24576 rows of keys and as many of values; a row is 128 bytes
# in f32, 64 in bf16, 34 in q8_0 (an f16 scale and 32 int8): 6291456,
# 3145728 and 1671168 bytes; 1024 positions more add a quarter of that.
check "info -ctk q8_0 -ctv bf16: exit 0" status 0 $RUN info "$moe" -c 4096 -ctk q8_0 --cache-type-v=bf16
check "info: the KV cache in the types asked for" \
    grep -q "KV cache 2.4 MB (context 4096, keys q8_0, values bf16)" "$tmp/out"
check "info: the KV cache by type" sh -c "grep -A3 '^KV cache by type' '$tmp/out' | tr -s ' ' | grep -c \
    -e '^ f32 6.3 MB at context 4096, 1.6 MB per 1024 positions more$' -e '^ bf16 3.1 MB at context 4096, 0.8 MB' \
    -e '^ q8_0 1.7 MB at context 4096, 0.4 MB' | grep -qx 3"
check "info on head_dim 16: q8_0 does not fit" grep -q "^  q8_0  needs head_dim a multiple of 32" "$(
    $RUN info "$model" >"$tmp/out"; echo "$tmp/out")"
for flag in -ctk --cache-type-k -ctv --cache-type-v; do
    long=--cache-type-k
    case $flag in -ctv | --cache-type-v) long=--cache-type-v ;; esac
    for bad in q4_0 f16 Q8_0; do
        check "fwd $flag $bad: exit 2" status 2 $RUN fwd "$model" 5 0 $flag $bad
        check "fwd $flag $bad: the types listed" \
            one_error "$long: '$bad' is not a KV cache type here: the types are f32 (exact), bf16 and q8_0"
    done
done
check "-ctk without a value: exit 2" status 2 $RUN fwd "$model" 5 0 -ctk
check "q8_0 on head_dim 16: exit 1" status 1 $RUN fwd "$model" 5 0 -ctv q8_0
check "q8_0 on head_dim 16: one line" one_error "a q8_0 KV cache needs head_dim to be a multiple of 32"
check "prepare -ctk: exit 2" status 2 $RUN prepare "$model" -ctk bf16
check "prepare -ctk: says why" one_error "prepare makes no KV cache"
for t in f32 bf16 q8_0; do
    check "fwd --tokens on the moe checkpoint, keys and values $t: exit 0" \
        status 0 $RUN fwd "$moe" --tokens 5,6,7,8 -ctk $t -ctv $t --logits "$tmp/logits.$t"
done
check "fwd: bf16 and q8_0 caches change the logits (3 positions see earlier keys)" \
    sh -c "! cmp -s '$tmp/logits.f32' '$tmp/logits.bf16' && ! cmp -s '$tmp/logits.f32' '$tmp/logits.q8_0'"
# Position 0 attends to itself alone, in every layer: its weight is e^0 / e^0
# = 1 exactly, whatever its key, so rounding only the keys leaves its logits.
check "fwd -ctk q8_0 -ctv f32: exit 0" status 0 $RUN fwd "$moe" --tokens 5,6,7,8 -ctk q8_0 --logits "$tmp/logits.keys"
check "fwd: rounding only the keys leaves position 0's logits" python3 -c "
import sys
a, b = (open(sys.argv[i], 'rb').read() for i in (1, 2))
sys.exit(0 if a[:2048 * 4] == b[:2048 * 4] and a[2048 * 4:] != b[2048 * 4:] else 1)" "$tmp/logits.f32" "$tmp/logits.keys"
# bench at depth: 16384 tokens in the cache (2048 on the plain C path, whose
# attention is some 30 times slower), q8_0 keys and values.
depth=16384
[ "${RUN_KERNELS:-}" = plain ] && depth=2048
long_model=$tmp/long
"$fixture" "$long_model" --seed 4 --set vocab_size=1000 --set head_dim=32 --set hidden_size=32 --set num_attention_heads=1 \
    --set num_key_value_heads=1 --set num_hidden_layers=1 --set max_position_embeddings=16512 >/dev/null
check "bench -d $depth -ctk q8_0 -ctv q8_0: exit 0" status 0 $RUN bench "$long_model" -d $depth -p 8 -n 4 -r 1 -ctk q8_0 -ctv q8_0
check "bench: says the cache's types" grep -q "kernels, KV cache q8_0/q8_0$" "$tmp/out"
check "bench: filled to the depth" grep -q "^filled the KV cache to depth $depth in " "$tmp/out"
check "bench -d: the tg line last" sh -c "tail -n 1 '$tmp/out' | grep -Eq '^tg4: [0-9]+\.[0-9] tok/s$'"

summary test_cli
