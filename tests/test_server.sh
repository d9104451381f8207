#!/bin/sh
# tests/test_server.sh - `run serve` end to end (tests/test_server.py, python3
# standard library only) on the generated checkpoint of test_gen.sh, against
# the reference's continuations and log-probabilities in
# tests/data/generation_golden.json (scripts/make_golden.py).
. tests/lib.sh

golden=tests/data/generation_golden.json
qwen_fixture checkpoint
python3 tests/test_server.py "$RUN" "$model" "$golden" "$tmp"
