#!/bin/sh
# tests/test_context.sh - prompts around the context in every subcommand
# (tests/test_context.py, python3 standard library only) on the generated
# checkpoint of test_gen.sh, against the reference's continuations in
# tests/data/generation_golden.json (scripts/make_golden.py).
. tests/lib.sh

golden=tests/data/generation_golden.json
qwen_fixture checkpoint
python3 tests/test_context.py "$RUN" "$model" "$golden"
