#!/bin/sh
# scripts/bench_template.sh [RUNS] - how long parsing and rendering a chat
# template takes: the Qwen3 template with the 50-turn conversation of
# tests/data/templates/conversations/many_turns.json, and with that
# conversation ten times over (500 turns, to show the time grows with the
# conversation and no faster). Prints the best time of RUNS (default 2000)
# parses and renders of each. A benchmark, not a test: the figures depend on
# the machine and on what else runs on it.
set -e
cd "$(dirname "$0")/.."
runs=${1:-2000}
make -s run
objects=$(ls build/*.o build/jinja/*.o | grep -v '/main\.o$')
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -O3 -march=native -o build/render_template scripts/render_template.c \
    $objects -lm -pthread
conversation=tests/data/templates/conversations/many_turns.json
long=build/many_turns_x10.json
# 500 turns: the 50-turn conversation's messages ten times over, one system message first
/usr/bin/python3 -c "
import json, sys
c = json.load(open('$conversation'))
m = c['messages']
c['messages'] = m[:1] + m[1:] * 10
c['add_generation_prompt'] = True
json.dump(c, open('$long', 'w'))
"
for vars in "$conversation" "$long"; do
    turns=$(/usr/bin/python3 -c "import json; print(len(json.load(open('$vars'))['messages']))")
    bytes=$(build/render_template tests/data/templates/qwen3.jinja "$vars" | wc -c)
    printf 'qwen3.jinja, %s messages, %s bytes out: ' "$turns" "$bytes"
    build/render_template --repeat "$runs" tests/data/templates/qwen3.jinja "$vars" 2>&1 >/dev/null
done
