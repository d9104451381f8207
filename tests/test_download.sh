#!/bin/sh
# tests/test_download.sh - scripts/download.sh against tests/hub_server.py, a
# stand-in for the Hugging Face hub on 127.0.0.1 that serves checkpoints
# made here by make_checkpoint. Nothing in it reaches the internet.
# shellcheck disable=SC2086 # $all_files and $shards are lists, split on purpose
. tests/lib.sh

fixture=${TESTBIN:-build/tests}/make_checkpoint
if [ ! -x "$fixture" ]; then
    fail "$fixture is not built (make $fixture)"
    summary test_download
    exit 1
fi
tmp=$(mktemp -d)
pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM # so that the EXIT trap runs

# ---- the served repos: test/<name> under $hub ----

hub=$tmp/hub
mkdir -p "$hub/test"
tokenizer=tests/data/qwen2.5-tokenizer.json  # unpacked by make test
# make_repo NAME MAKE_CHECKPOINT_FLAGS...: a repo with the files a checkpoint
# folder has on the hub. The model is tiny, but keeps Qwen2's vocabulary so
# that the tokenizer fits it (the weights are then 4.9 MB).
make_repo() {
    r=$hub/test/$1
    shift
    "$fixture" "$r" --set hidden_size=16 --set intermediate_size=32 --set num_attention_heads=2 \
        --set num_key_value_heads=1 "$@" >/dev/null || return 1
    cp "$tokenizer" "$r/tokenizer.json"
    echo '{"model_max_length": 32768}' >"$r/tokenizer_config.json"
}
make_repo tiny --seed 1
echo '{"do_sample": true, "temperature": 0.7}' >"$hub/test/tiny/generation_config.json"
make_repo sharded --seed 2 --shards 3 # and no generation_config.json: it is optional
make_repo broken --seed 3
# A broken header: its first character is no longer the '{' of the JSON.
printf 'X' | dd of="$hub/test/broken/model.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
make_repo notok --seed 4
rm "$hub/test/notok/tokenizer.json"
# The same checkpoint under more names: faults are set per repo and file.
for name in gated cut cut-wget short wget signed; do ln -s tiny "$hub/test/$name"; done

# ---- servers ----

# start_server NAME OPTIONS...: starts a hub_server on $hub with its request
# log in $tmp/NAME.log, and points $endpoint at it.
start_server() {
    name=$1
    shift
    python3 tests/hub_server.py "$hub" --port-file "$tmp/$name.port" --log "$tmp/$name.log" "$@" \
        >/dev/null 2>"$tmp/$name.err" &
    pids="$pids $!"
    tries=0
    while [ ! -s "$tmp/$name.port" ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 200 ]; then
            fail "hub_server $name did not start: $(cat "$tmp/$name.err")"
            summary test_download
            exit 1
        fi
        sleep 0.05
    done
    endpoint=http://127.0.0.1:$(cat "$tmp/$name.port")
    log=$tmp/$name.log
}

# ---- running the script ----

token=
path=$PATH
shell=$(command -v sh)

# dl REPO DIR: runs the script against $endpoint, with $token as HF_TOKEN and
# $path as PATH; keeps its stderr in $tmp/err and returns its status. A proxy
# set in the environment must not see the requests to 127.0.0.1.
dl() {
    HF_ENDPOINT=$endpoint HF_TOKEN=$token PATH=$path RUN=$RUN no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost \
        "$shell" scripts/download.sh "$@" >"$tmp/out" 2>"$tmp/err"
}

# ok REPO DIR: the script succeeds.
ok() {
    dl "$@" && return
    echo "  status $?: $(cat "$tmp/err")"
    return 1
}

# refused STATUS PATTERN ARGS...: the script exits with STATUS, and its
# stderr matches the grep pattern PATTERN.
refused() {
    want=$1
    pattern=$2
    shift 2
    dl "$@"
    got=$?
    [ "$got" = "$want" ] && grep -q -- "$pattern" "$tmp/err" && return
    echo "  status $got (expected $want): $(cat "$tmp/err")"
    return 1
}

# same DIR REPO FILE...: each FILE in DIR is byte for byte the served one.
same() {
    d=$1
    r=$hub/test/$2
    shift 2
    for f in "$@"; do cmp -s "$d/$f" "$r/$f" || { echo "  $d/$f differs from $r/$f"; return 1; }; done
}

# no_part DIR: no temporary .part file is left in DIR.
no_part() {
    for f in "$1"/*.part; do [ ! -e "$f" ] || return 1; done
}

# mark / gets_since_mark: the GET requests in the server log since the mark.
mark() { marked=$(wc -l <"$log"); }
gets_since_mark() { tail -n "+$((marked + 1))" "$log" | grep -c '^GET '; }

all_files="config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors"
out=$tmp/out.d # download folders go in here
mkdir "$out"

start_server hub --gated test/gated=s3cret --cut test/cut/model.safetensors \
    --cut test/cut-wget/model.safetensors --short test/short/model.safetensors

# ---- usage ----

check "no arguments: status 2" refused 2 "usage:"
check "three arguments: status 2" refused 2 "expected 2 arguments" a/b c d
check "a URL is not a repo id: status 2" refused 2 "not a repo id" https://huggingface.co/Qwen/x "$out/u"
check "-h prints the usage on stdout" sh -c 'sh scripts/download.sh -h | grep -q "^usage: scripts/download.sh REPO_ID DIR"'

# ---- a full download, then nothing to do ----

check "full download" ok test/tiny "$out/tiny"
check "full download: files identical" same "$out/tiny" tiny $all_files
check "full download: no .part left" no_part "$out/tiny"
check "full download: says it checked with run info --check" grep -q "info --check accepts it" "$tmp/err"
mark
check "complete folder: succeeds again" ok test/tiny "$out/tiny"
check "complete folder: nothing fetched again" test "$(gets_since_mark)" = 0
check "complete folder: each file reported as skipped" test "$(grep -c 'complete, skipped' "$tmp/err")" = 5

# A file whose size differs from the server's is fetched again.
echo '{}' >"$out/tiny/config.json"
check "stale file: succeeds" ok test/tiny "$out/tiny"
check "stale file: fetched again" same "$out/tiny" tiny config.json

# ---- resuming ----

# The server drops the first transfer of the weights halfway; the script
# resumes from where it stopped, in the same run.
check "cut download: succeeds" ok test/cut "$out/cut"
check "cut download: identical" same "$out/cut" tiny model.safetensors
check "cut download: resumed with a Range request" grep -q "^GET /cdn/test/cut/model.safetensors 206 bytes=[1-9]" "$log"

# A .part file left by an earlier run that was stopped: a new run resumes it.
mkdir "$out/rerun"
dd if="$hub/test/tiny/model.safetensors" of="$out/rerun/model.safetensors.part" bs=1000 count=100 2>/dev/null
check "rerun: succeeds" ok test/tiny "$out/rerun"
check "rerun: identical" same "$out/rerun" tiny $all_files
check "rerun: asked only for the rest" grep -q "^GET /cdn/test/tiny/model.safetensors 206 bytes=100000-" "$log"

# ---- a sharded checkpoint ----

shards="model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors"
check "sharded: succeeds" ok test/sharded "$out/sharded"
check "sharded: index and shards identical" same "$out/sharded" sharded model.safetensors.index.json $shards \
    config.json tokenizer.json tokenizer_config.json
check "sharded: no model.safetensors, no generation_config.json" \
    test ! -e "$out/sharded/model.safetensors" -a ! -e "$out/sharded/generation_config.json"

# ---- what cannot be downloaded ----

check "wrong repo id: status 1, says so" refused 1 "repo test/nope not found.*wrong repo id" test/nope "$out/nope"
check "missing tokenizer.json: status 1, names it" refused 1 "tokenizer.json not found in repo test/notok" \
    test/notok "$out/notok"
check "gated repo without HF_TOKEN: status 1, asks for it" refused 1 "gated or private.*set HF_TOKEN" \
    test/gated "$out/gated"
token=wrong
check "gated repo with a wrong HF_TOKEN: status 1" refused 1 "HF_TOKEN has no access to test/gated" \
    test/gated "$out/gated"
token='hf_abc def'
check "HF_TOKEN with a space: status 1" refused 1 "HF_TOKEN holds characters" test/gated "$out/gated"
token=s3cret
check "gated repo with HF_TOKEN" ok test/gated "$out/gated"
check "gated repo with HF_TOKEN: identical" same "$out/gated" tiny $all_files
token=

# The server's answer is complete but shorter than its HEAD announced.
check "size mismatch: status 1, says so" refused 1 "model.safetensors: got [0-9]* bytes but the server announced" \
    test/short "$out/short"
check "size mismatch: nothing kept" test ! -e "$out/short/model.safetensors" -a ! -e "$out/short/model.safetensors.part"

# A full disk, seen before the download: df reports 1 kB free.
mkdir "$tmp/dfbin"
printf '#!/bin/sh\necho "Filesystem 1024-blocks Used Available Capacity Mounted on"\necho "/dev/x 100 99 1 99%% /"\n' \
    >"$tmp/dfbin/df"
chmod +x "$tmp/dfbin/df"
path=$tmp/dfbin:$PATH
check "full disk (df): status 1, says so" refused 1 "not enough space in .*needs [0-9.]* MB, 1.0 kB free" \
    test/tiny "$out/full"
path=$PATH
# A full disk during the download: writing to /dev/full fails with ENOSPC.
mkdir "$out/devfull"
ln -s /dev/full "$out/devfull/model.safetensors.part"
check "full disk (write error): status 1, says so" refused 1 "cannot write .*model.safetensors.part: disk full" \
    test/tiny "$out/devfull"

# Nothing listens on the port of a server that was stopped.
saved=$endpoint
endpoint=http://127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
check "no server: status 1, names the endpoint" refused 1 "cannot connect to $endpoint" test/tiny "$out/down"
check "no server: no empty folder left behind" test ! -e "$out/down"
check "no server: nor the missing parents made for it" refused 1 "cannot connect" test/tiny "$out/new/models/x"
check "no server: ... all gone" test ! -e "$out/new"
mkdir "$out/kept"
check "no server: a folder that was there stays" refused 1 "cannot connect" test/tiny "$out/kept"
check "no server: ... there" test -d "$out/kept"
endpoint=$saved

# ---- the wget path: a PATH with wget and without curl ----

mkdir "$tmp/bin"
for c in awk df dirname ls mkdir mktemp mv rm sed sleep sort tr wget; do # what the script runs
    ln -s "$(command -v "$c")" "$tmp/bin/$c"
done
path=$tmp/bin
check "wget: full download" ok test/wget "$out/wget"
check "wget: says it used wget" grep -q "(with wget)" "$tmp/err"
check "wget: identical" same "$out/wget" tiny $all_files
check "wget: cut download succeeds" ok test/cut-wget "$out/cut-wget"
check "wget: cut download identical" same "$out/cut-wget" tiny model.safetensors
check "wget: resumed with a Range request" grep -q "^GET /cdn/test/cut-wget/model.safetensors 206 bytes=[1-9]" "$log"
check "wget: sharded" ok test/sharded "$out/sharded-wget"
check "wget: sharded identical" same "$out/sharded-wget" sharded model.safetensors.index.json $shards
check "wget: wrong repo id" refused 1 "repo test/nope not found.*wrong repo id" test/nope "$out/nope"
check "wget: gated repo without HF_TOKEN" refused 1 "gated or private.*set HF_TOKEN" test/gated "$out/gated-wget"
token=s3cret
check "wget: gated repo with HF_TOKEN" ok test/gated "$out/gated-wget"
token=
check "wget: full disk (write error)" refused 1 "cannot write .*disk full" test/tiny "$out/devfull"
saved=$endpoint
endpoint=http://127.0.0.1:1
check "wget: no server" refused 1 "cannot connect to $endpoint" test/tiny "$out/down"
endpoint=$saved
rm "$tmp/bin/wget"
check "neither curl nor wget: status 1" refused 1 "needs curl or wget" test/tiny "$out/none"
path=$PATH

# ---- a server that answers like the hub itself ----
# The hub answers a missing repo with 401 when no token is sent, keeps
# large files on a CDN under another host name, and may announce their size
# only in X-Linked-Size. The token must never reach the CDN.

start_server like-hub --gated test/gated=s3cret --missing-repo-status 401 --no-cdn-length --cdn-host localhost \
    --cdn-refuses-head test/signed/model.safetensors
check "hub-like: wrong repo id answered 401: says not found" refused 1 "repo test/nope not found.*HF_TOKEN" \
    test/nope "$out/nope"
check "hub-like: size from X-Linked-Size" ok test/tiny "$out/like-hub"
check "hub-like: identical" same "$out/like-hub" tiny $all_files
check "hub-like: a CDN that refuses HEAD" ok test/signed "$out/signed"
check "hub-like: a CDN that refuses HEAD: identical" same "$out/signed" tiny model.safetensors
token=s3cret
check "hub-like: gated repo with HF_TOKEN" ok test/gated "$out/like-hub-gated"
path=$tmp/bin
ln -s "$(command -v wget)" "$tmp/bin/wget"
check "hub-like: gated repo with HF_TOKEN, wget" ok test/gated "$out/like-hub-gated-wget"
path=$PATH
token=
check "hub-like: the token went to the hub" grep -q "^HEAD /test/gated/resolve/main/config.json 200 - auth$" "$log"
no_token_to_cdn() { ! grep -q "^[A-Z]* /cdn/.* auth$" "$log"; }
check "hub-like: the token never went to the CDN" no_token_to_cdn

# ---- the check with ./run info --check ----

check "broken header: status 1, with run's message" refused 1 \
    "info --check rejects .*/broken: .*/broken/model.safetensors: header" test/broken "$out/broken"

summary test_download
