#!/bin/sh
# scripts/check_templates.sh [TOKENIZER_CONFIG...] - renders chat templates
# that may not be committed to the repository (Llama 3's is under Meta's
# Llama 3 Community License) with Python's jinja2 and with template.c, over
# every conversation and option of scripts/make_template_golden.py, and
# compares the two byte for byte. By default it checks the tokenizer
# configs in $SHARED/models (Llama 3, and Qwen2.5 and Qwen3 again); SHARED is
# ../shared, or ../../shared from a worktree one level deeper.
#
# Needs /usr/bin/python3 with Debian's python3-jinja2. Builds
# scripts/render_template.c against the library (build/render_template).
set -e
cd "$(dirname "$0")/.."
make -s run
objects=$(ls build/*.o build/jinja/*.o | grep -v '/main\.o$')
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -O2 -o build/render_template scripts/render_template.c $objects -lm -pthread
if [ $# -eq 0 ]; then
    shared=${SHARED:-../shared}
    [ -d "$shared" ] || shared=../../shared
    set -- "$shared"/models/llama3-tokenizer/tokenizer_config.json \
        "$shared"/models/qwen2.5-tokenizer/tokenizer_config.json \
        "$shared"/models/qwen3-tokenizer/tokenizer_config.json
fi
status=0
for config in "$@"; do
    /usr/bin/python3 scripts/make_template_golden.py --check "$config" build/render_template || status=1
done
exit $status
