#!/bin/sh
# tests/test_embed.sh - `run embed` and POST /v1/embeddings end to end
# (tests/test_embed.py, python3 standard library only) on the checkpoint of
# tests/data/embed_golden.json, against the numpy reference's vectors made
# by scripts/make_embed_golden.py: the last token, the mean (modules.json)
# and the CLS token (without Normalize).
fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/embed_golden.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/model
# shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
"$fixture" "$model" $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$golden") >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"
python3 tests/test_embed.py "${RUN:-./run}" "$model" "$golden" "$tmp"
