#!/bin/sh
# tests/test_ppl.sh - run ppl against the perplexity that the numpy reference's
# logits give tests/data/ppl_text.txt, for one window and for sliding windows
# (tests/data/inside_golden.json, made by scripts/make_inside_golden.py), and
# its errors.
. tests/lib.sh

golden=tests/data/inside_golden.json
qwen_fixture gen_checkpoint
text=tests/data/ppl_text.txt
check "ppl: the text's ids are the reference tokenizer's" test "$($RUN tok "$model" -f "$text")" = "$(field ppl_ids)"

# same_ppl CASE: the last run's line against case CASE of the golden file:
# perplexity within 1e-4 relative, its standard error within 1e-3, the count.
same_ppl() {
    python3 - "$golden" "$1" "$tmp/out" <<'PY'
import json, re, sys
want = json.load(open(sys.argv[1]))["ppl"][int(sys.argv[2])]
line = open(sys.argv[3]).read()
m = re.fullmatch(r"perplexity: (\S+) \+/- (\S+) \((\d+) tokens scored, (\d+) windows? of (\d+) tokens, stride (\d+), \S+ weights\)\n", line)
if not m:
    sys.exit("unexpected output: %r" % line)
ppl, err, scored = float(m[1]), float(m[2]), int(m[3])
ok = abs(ppl - want["ppl"]) <= 1e-4 * want["ppl"] and abs(err - want["error"]) <= 1e-3 * want["error"] and scored == want["scored"]
if not ok:
    sys.exit("got %r +/- %r over %d tokens, the reference %r +/- %r over %d" % (ppl, err, scored, want["ppl"], want["error"], want["scored"]))
PY
}

n_cases=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["ppl"]))' "$golden")
i=0
while [ "$i" -lt "$n_cases" ]; do
    window=$(field ppl $i window)
    stride=$(field ppl $i stride)
    status 0 $RUN ppl "$model" "$text" -c "$window" --stride "$stride"
    check "ppl -c $window --stride $stride: exit 0" test $? -eq 0
    check "ppl -c $window --stride $stride: the reference's perplexity" same_ppl $i
    i=$((i + 1))
done
# The window and stride of case 1, with its progress lines.
windows=$(python3 -c 'import sys; n, w, s = map(int, sys.argv[1:]); print(1 if n <= w else (n - w + s - 1) // s + 1)' \
    "$(field ppl_ids | wc -w)" "$(field ppl 1 window)" "$(field ppl 1 stride)")
$RUN ppl "$model" "$text" -c "$(field ppl 1 window)" --stride "$(field ppl 1 stride)" >"$tmp/out" 2>"$tmp/err"
check "ppl: a progress line per window on stderr" test "$(grep -c '^\[[0-9]*/'"$windows"'\] tokens ' "$tmp/err")" -eq "$windows"
$RUN ppl "$model" - -c "$(field ppl 1 window)" --stride "$(field ppl 1 stride)" --dtype f32 <"$text" >"$tmp/out" 2>/dev/null
check "ppl --dtype f32 from standard input: the same perplexity" same_ppl 1
$RUN ppl "$model" "$text" -c "$(field ppl 1 window)" --stride "$(field ppl 1 stride)" --dtype q8 >"$tmp/out" 2>/dev/null
check "ppl --dtype q8: says its format" grep -q "q8 weights)$" "$tmp/out"
# A KV cache of bf16: the line says so; the perplexity moves, but little (the
# logits move by at most 1.5e-2 of the largest: tests/test_net.c).
$RUN ppl "$model" "$text" -c "$(field ppl 1 window)" --stride "$(field ppl 1 stride)" -ctk bf16 -ctv bf16 >"$tmp/bf16" 2>/dev/null
check "ppl -ctk bf16 -ctv bf16: says its KV cache" grep -q "bf16 weights, KV cache bf16/bf16)$" "$tmp/bf16"
$RUN ppl "$model" "$text" -c "$(field ppl 1 window)" --stride "$(field ppl 1 stride)" >"$tmp/f32" 2>/dev/null
check "ppl -ctk bf16 -ctv bf16: another perplexity, within 1% of f32's" python3 -c "
import sys
a, b = (float(open(f).read().split()[1]) for f in sys.argv[1:3])
sys.exit(0 if a != b and abs(a - b) <= 1e-2 * b else 1)" "$tmp/bf16" "$tmp/f32"
status 1 $RUN ppl "$model" "$text" -ctk q8_0
check "ppl -ctk q8_0 on head_dim 16: refused" one_error "a q8_0 KV cache needs head_dim to be a multiple of 32"

# ---- errors ----
status 2 $RUN ppl "$model"
check "ppl without FILE: usage error" one_error "FILE is missing"
status 2 $RUN ppl "$model" "$text" -c 8 --stride 9
check "ppl: a stride longer than the window: usage error" one_error "stride 9 is longer than the window"
status 2 $RUN ppl "$model" "$text" --stride 0
check "ppl --stride 0: usage error" one_error "expected an integer"
printf 'Hi' >"$tmp/short"
status 1 $RUN ppl "$model" "$tmp/short"
check "ppl: a text of one token: runtime error" one_error "perplexity needs at least 2"
status 1 $RUN ppl "$model" "$tmp/missing"
check "ppl: a missing file: runtime error" one_error "missing"

summary test_ppl
