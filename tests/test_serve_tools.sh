#!/bin/sh
# tests/test_serve_tools.sh - `run serve`'s structured output, tool calls,
# reasoning, logit_bias and penalties end to end (tests/test_serve_tools.py,
# python3 standard library only) on random-weight checkpoints: Qwen2.5 and
# Qwen3 with their real tokenizers and templates, Llama with the small
# llama-style tokenizer and a Llama-3.1-style template.
fixture=${TESTBIN:-build/tests}/make_checkpoint
golden=tests/data/generation_golden.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2046 # the checkpoint's flags are split on purpose
"$fixture" "$tmp/qwen2" $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$golden") >/dev/null
cp tests/data/qwen2.5-tokenizer.json "$tmp/qwen2/tokenizer.json"
cp tests/data/templates/qwen2.5.jinja "$tmp/qwen2/chat_template.jinja"
"$fixture" "$tmp/qwen3" --seed 34 --set model_type='"qwen3"' --set head_dim=32 >/dev/null
cp tests/data/qwen3-tokenizer.json "$tmp/qwen3/tokenizer.json"
cp tests/data/templates/qwen3.jinja "$tmp/qwen3/chat_template.jinja"
"$fixture" "$tmp/llama" --seed 35 --set model_type='"llama"' --set vocab_size=693 --set bos_token_id=687 \
    --set eos_token_id=691 >/dev/null
cp tests/data/llama-style-tokenizer.json "$tmp/llama/tokenizer.json"
cp tests/data/templates/tools_dated.jinja "$tmp/llama/chat_template.jinja"
echo '{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}' >"$tmp/llama/tokenizer_config.json"
mkdir "$tmp/plain" && cp "$tmp/llama/"* "$tmp/plain/" && cp tests/data/templates/llama3_like.jinja "$tmp/plain/chat_template.jinja"
python3 tests/test_serve_tools.py "${RUN:-./run}" "$tmp"
