#!/bin/sh
# tests/test_context.sh - prompts around the context in every subcommand
# (tests/test_context.py, python3 standard library only) on the generated
# checkpoint of test_gen.sh, against the reference's continuations in
# tests/data/generation_golden.json (scripts/make_golden.py).
fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/generation_golden.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/model
# shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
"$fixture" "$model" $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$golden") >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$model/tokenizer.json"
cp tests/data/templates/qwen2.5.jinja "$model/chat_template.jinja"
python3 tests/test_context.py "${RUN:-./run}" "$model" "$golden"
