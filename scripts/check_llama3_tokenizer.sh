#!/bin/sh
# scripts/check_llama3_tokenizer.sh - checks the tokenizer on Meta's Llama 3
# tokenizer against the golden data Hugging Face's tokenizers library made
# for it, in the shared folder (not in the repository: the tokenizer is under
# Meta's license, so the project's own tests use small tokenizers of its own
# with the same pipeline, tests/data/llama-style-*).
#
#   sh scripts/check_llama3_tokenizer.sh [SHARED_DIR]    (default ../shared)
#
# For each of the 484 lines of tokenizer-golden/llama3.jsonl: the text must
# encode to "ids" (add_special_tokens=False) and to "ids_with_special" (True:
# <|begin_of_text|> first), and "ids" must decode to "decoded". Then the same
# for the Qwen2.5 golden file in tests/data, and the reference of
# scripts/make_small_tokenizers.py must agree with llama3.jsonl too (it made
# the small tokenizers' golden ids). Builds scripts/check_tokenizer.c against
# the library; prints the failing lines and a summary per file; exits 0 only
# when every line passes.
set -e
cd "$(dirname "$0")/.."
shared=${1:-../shared}
tokenizer=$shared/models/llama3-tokenizer/tokenizer.json
golden=$shared/tokenizer-golden/llama3.jsonl
for f in "$tokenizer" "$golden"; do
    [ -f "$f" ] || { echo "check_llama3_tokenizer: $f is missing (give the shared folder as an argument)" >&2; exit 1; }
done
make -s run tests/data/qwen2.5-tokenizer.json
objects=$(ls build/*.o build/jinja/*.o | grep -v '/main\.o$')
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -O2 -o build/check_tokenizer scripts/check_tokenizer.c $objects -lm -pthread
status=0
./build/check_tokenizer "$tokenizer" "$golden" || status=1
./build/check_tokenizer tests/data/qwen2.5-tokenizer.json tests/data/qwen2.5.jsonl || status=1
python3 scripts/make_small_tokenizers.py --check-llama3 "$shared/tokenizer-golden" || status=1
exit $status
