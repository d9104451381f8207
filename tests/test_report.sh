#!/bin/sh
# tests/test_report.sh - what gen -v/-vv print and what --report writes,
# against the numpy reference (tests/data/inside_golden.json, made by
# scripts/make_inside_golden.py): the model's probabilities, the residual
# stream's norms, each sampling stage's probabilities, attention weights, the
# logit lens. Then Chromium (Debian's chromium, headless) opens reports: no
# error, the token view, the heat map and the logit-lens table drawn, and a
# screenshot that is not blank. Chromium missing is a failure, not a skip.
. tests/lib.sh

fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/inside_golden.json
qwen_fixture gen_checkpoint

# ---- -v: a line per token with the model's probabilities ----
prompt=$(field verbose prompt)
check "-v: the prompt's ids are the reference tokenizer's" test "$($RUN tok "$model" "$prompt")" = "$(field verbose prompt_ids)"
$RUN gen "$model" "$prompt" --temp 0 -n 1 -v >/dev/null 2>"$tmp/err"
check "gen -v: exit 0" test $? -eq 0
check "gen -v: the chosen token, its probability and the 3 next as the reference's softmax" python3 - "$golden" "$tmp/err" <<'PY'
import json, re, sys
want = json.load(open(sys.argv[1]))["verbose"]
lines = [l for l in open(sys.argv[2], encoding="utf-8") if l.startswith("pos ")]
m = re.fullmatch(r'pos +(\d+) +token +(\d+) ".*"  p=(\S+)  top:((?: "(?:[^"\\]|\\.)*" \S+)+)  (\S+) ms\n', lines[0]) if len(lines) == 1 else None
if not m:
    sys.exit("unexpected lines: %r" % lines)
pos, token, p = int(m[1]), int(m[2]), float(m[3])
alternatives = [float(x) for x in re.findall(r'"(?:[^"\\]|\\.)*" (\S+)', m[4])]
got = [p] + alternatives
if pos != len(want["prompt_ids"]) or token != want["ids"][0] or len(got) != 4 or \
        any(abs(g - w) > 6e-4 * w for g, w in zip(got, want["probs"])):
    sys.exit("got position %d token %d probabilities %r; the reference: token %d %r" % (pos, token, got, want["ids"][0], want["probs"]))
PY
$RUN gen "$model" "$prompt" --temp 0 -n 1 -vv >/dev/null 2>"$tmp/err"
check "gen -vv: each layer's |x| of the prompt's last token as the reference's" python3 - "$golden" "$tmp/err" <<'PY'
import json, re, sys
want = json.load(open(sys.argv[1]))["verbose"]["resid_norms"]
got = [float(x) for x in re.findall(r"^layer +\d+ x\+mlp +\[.*\] \|x\+mlp\|=(\S+)$", open(sys.argv[2]).read(), re.M)]
if len(got) != len(want) or any(abs(g - w) > 1e-4 * w for g, w in zip(got, want)):
    sys.exit("got %r, the reference %r" % (got, want))
PY
check "gen -vv: every step of every layer" test "$(grep -c '^layer  [0-9] ' "$tmp/err")" -eq $((3 * 11))
check "gen -vv: and the line per token" test "$(grep -c '^pos ' "$tmp/err")" -eq 1

# ---- --report: the sampling stages of a step ----
stage_args="--temp $(field stages flags temp) --top-k $(field stages flags top_k) --top-p $(field stages flags top_p)"
stage_args="$stage_args --min-p $(field stages flags min_p) --repeat-penalty $(field stages flags repeat_penalty)"
# shellcheck disable=SC2086
$RUN gen "$model" "$(field stages prompt)" -n 3 $stage_args --seed 5 --report "$tmp/gen.html" >/dev/null 2>"$tmp/err"
check "gen --report: exit 0" test $? -eq 0
check "gen --report: says where" grep -q "report written to $tmp/gen.html" "$tmp/err"
check "gen --report: the prompt's ids are the reference tokenizer's" \
    test "$($RUN tok "$model" "$(field stages prompt)")" = "$(field stages prompt_ids)"
check "gen --report: each stage's top tokens with the probabilities of the reference's logits after it" \
    python3 tests/check_report.py stages "$golden" "$tmp/gen.html"
# shellcheck disable=SC2086
$RUN gen "$model" "$(field stages prompt)" -n 3 $stage_args --seed 5 >"$tmp/plain" 2>/dev/null
$RUN gen "$model" "$(field stages prompt)" -n 3 $stage_args --seed 5 --report "$tmp/again.html" >"$tmp/reported" 2>/dev/null
check "gen --report: the same text as without" cmp -s "$tmp/plain" "$tmp/reported"
check "gen --report: no byte depends on anything but the run, the times aside" sh -c \
    "sed 's/\"[a-z_]*seconds\": [0-9.]*//g; s/\"ms\": [0-9.]*//g' '$tmp/gen.html' >'$tmp/a'; sed 's/\"[a-z_]*seconds\": [0-9.]*//g; s/\"ms\": [0-9.]*//g' '$tmp/again.html' >'$tmp/b'; cmp -s '$tmp/a' '$tmp/b'"

# ---- fwd --tokens --report: attention, the logit lens and norms ----
small=$tmp/small
# shellcheck disable=SC2046
"$fixture" "$small" $(field fwd_checkpoint) >/dev/null
$RUN fwd "$small" --tokens "$(field forward ids)" --report "$tmp/fwd.html" >/dev/null 2>&1
check "fwd --report: exit 0" test $? -eq 0
check "fwd --report: attention within 1e-4 of the reference's, the logit lens (its last layer the final logits), norms, outliers" \
    python3 tests/check_report.py forward "$golden" "$tmp/fwd.html"
# A long pass: attention kept for the first positions only, and the page says so.
long_ids=$(python3 -c 'print(",".join(str((i * 7919 + 13) % 2048) for i in range(600)))')
$RUN fwd "$small" --tokens "$long_ids" --report "$tmp/long.html" >/dev/null 2>&1
check "fwd --report of 600 tokens: bounded (attention of the first 500, under 20 MB), the rest kept" python3 - "$tmp/long.html" <<'PY'
import json, os, re, sys
d = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', open(sys.argv[1]).read(), re.S)[1])
o = d["left_out"]
ok = o == {"statistics_from": 600, "attention_from": 500, "positions": 600} and d["attention"]["positions"] == 500 and \
    len(d["attention"]["weights"][1][3]) == 500 * 501 // 2 and d["layers"]["positions"] == 600 and os.path.getsize(sys.argv[1]) < 20e6
sys.exit(0 if ok else "left out %r, %d bytes" % (o, os.path.getsize(sys.argv[1])))
PY
status 2 $RUN fwd "$small" 5 0 --report "$tmp/x.html"
check "fwd --report without --tokens: usage error" one_error "report needs --tokens"
status 1 $RUN fwd "$small" --tokens 1,2 --report "$tmp/no/such/folder/x.html"
check "fwd --report into a missing folder: runtime error" one_error "cannot create"

# ---- a mixture of experts: the router's choices ----
moe=$tmp/moe
moe_case=qwen3moe-router-ties-top2
python3 - "$moe_case" >"$tmp/moe_case" <<'PY'
import json, sys
c = next(c for c in json.load(open("tests/data/forward_golden.json"))["cases"] if c["name"] == sys.argv[1])
print(c["args"]); print(",".join(map(str, c["tokens"])))
PY
# shellcheck disable=SC2046
eval "\"$fixture\" \"$moe\" $(sed -n 1p "$tmp/moe_case")" >/dev/null
$RUN fwd "$moe" --tokens "$(sed -n 2p "$tmp/moe_case")" --report "$tmp/moe.html" >/dev/null 2>&1
check "fwd --report on a mixture of experts: exit 0" test $? -eq 0
check "fwd --report on a mixture of experts: each token's experts in each sparse layer are the reference's (torch.topk's)" \
    python3 - "$moe_case" "$tmp/moe.html" <<'PY'
import json, re, sys
c = next(c for c in json.load(open("tests/data/forward_golden.json"))["cases"] if c["name"] == sys.argv[1])
d = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', open(sys.argv[2]).read(), re.S)[1])
got = [layer for layer in d["layers"]["experts"] if any(layer)]
weights = [w for layer in d["layers"]["expert_weights"] for token in layer for w in token]
ok = got == c["routes"] and len(d["layers"]["experts"]) == 3 and all(0 < w < 1 for w in weights) and len(weights) == 3 * 40 * 2
sys.exit(0 if ok else "experts %r..., want %r..." % (got[0][:3], c["routes"][0][:3]))
PY

# ---- chat --report: the conversation as it stands at the end ----
printf 'hi\nhow are you\n' | $RUN chat "$model" --temp 0 -n 4 --report "$tmp/chat.html" >/dev/null 2>&1
check "chat --report: exit 0" test $? -eq 0
check "chat --report: a step per token of the two replies" python3 - "$tmp/chat.html" <<'PY'
import json, re, sys
d = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', open(sys.argv[1]).read(), re.S)[1])
ok = len(d["steps"]) == 8 and all(d["tokens"][s["pos"]] == s["chosen"] for s in d["steps"] if s["pos"] < len(d["tokens"]))
sys.exit(0 if ok else "steps %r" % [(s["pos"], s["chosen"]) for s in d["steps"]])
PY

printf 'hi there friend\n/reset\nhello\n' | $RUN chat "$model" --temp 0 -n 4 --report "$tmp/reset.html" >/dev/null 2>&1
check "chat --report after /reset: the new conversation only, its 4 steps" python3 - "$tmp/reset.html" <<'PY'
import json, re, sys
d = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', open(sys.argv[1]).read(), re.S)[1])
steps = [s["pos"] for s in d["steps"]]
ok = len(steps) == 4 and steps == list(range(len(d["tokens"]) - 4, len(d["tokens"]))) and d["left_out"]["positions"] == len(d["tokens"]) - 1
sys.exit(0 if ok else "steps at %r of %d tokens" % (steps, len(d["tokens"])))
PY

# ---- in a browser ----
# browser REPORT NAME: Chromium's DOM of the page into $tmp/NAME.dom and a
# screenshot into $tmp/NAME.png; its console into $tmp/NAME.log.
browser() {
    timeout 120 chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
        --user-data-dir="$tmp/profile" --dump-dom "file://$1" >"$tmp/$2.dom" 2>"$tmp/$2.log" &&
        timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1400 \
            --user-data-dir="$tmp/profile" --screenshot="$tmp/$2.png" "file://$1" >/dev/null 2>&1
}
if ! command -v chromium >/dev/null 2>&1; then
    fail "chromium is not installed: the report's browser test needs Debian's chromium package"
else
    for page in gen fwd chat; do
        browser "$tmp/$page.html" "$page"
        check "chromium opens the $page report" test $? -eq 0
        check "$page report in chromium: no console error" sh -c "! grep -E 'Uncaught|CONSOLE.*(Error|error)' '$tmp/$page.log'"
        check "$page report in chromium: drawn without error, token view, heat map, logit lens and statistics cells" \
            python3 tests/check_report.py dom "$tmp/$page.dom" "$tmp/$page.html"
    done
    check "gen report in chromium: the screenshot is not blank" python3 tests/check_report.py png "$tmp/gen.png"
    browser "$tmp/moe.html#experts" moe
    check "a mixture's report at #experts in chromium: each token's experts in the table, as the data has them" python3 - \
        "$tmp/moe.dom" "$tmp/moe.html" <<'PY'
import json, re, sys
dom = open(sys.argv[1]).read()
d = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', open(sys.argv[2]).read(), re.S)[1])
table = re.search(r'<table id="experts-table">(.*?)</table>', dom, re.S)
cells = re.findall(r'<td class="stat-cell"[^>]*>([^<]*)</td>', table[1]) if table else []
want = [" ".join(map(str, d["layers"]["experts"][l][p])) or "dense" for p in range(40) for l in range(3)]
sys.exit(0 if cells == want and 'id="expert-use"' in dom else "cells %r, want %r" % (cells[:6], want[:6]))
PY
fi

summary test_report
