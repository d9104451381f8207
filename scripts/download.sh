#!/bin/sh
# scripts/download.sh - fetches a checkpoint from the Hugging Face hub into a
# folder that ./run can load.
#
# usage: scripts/download.sh REPO_ID DIR
#
# Fetches config.json, tokenizer.json, tokenizer_config.json,
# generation_config.json (when the repo has one) and the weights: either
# model.safetensors, or model.safetensors.index.json and every shard it
# names. Each file comes from $HF_ENDPOINT/REPO_ID/resolve/main/FILE.
#
# Environment:
#   HF_ENDPOINT  the hub or a mirror of it (default https://huggingface.co)
#   HF_TOKEN     an access token, for gated or private repos
#   RUN          the run binary that checks the result (default: ../run
#                next to this script)
#
# A file is written as FILE.part and renamed only once it has the size the
# server announced, so a folder never holds a half file under its real name.
# An interrupted download resumes where it stopped, and files that are
# already complete are not fetched again. It uses curl, or wget when curl
# is missing. Exit status: 0 success, 1 runtime error, 2 usage error.

me=download.sh

usage() {
    echo "usage: scripts/download.sh REPO_ID DIR
Fetches the checkpoint REPO_ID (e.g. Qwen/Qwen2.5-0.5B-Instruct) from the
Hugging Face hub into the folder DIR; files already complete are skipped and
an interrupted download resumes. HF_ENDPOINT selects a mirror, HF_TOKEN
authenticates (gated or private repos).
Exit status: 0 success, 1 runtime error, 2 usage error."
}

say() { echo "$me: $*" >&2; }
die() {
    say "$*"
    exit 1
}
die_usage() {
    say "$*"
    usage >&2
    exit 2
}

case $1 in
-h | --help)
    usage
    exit 0
    ;;
-*) die_usage "unknown option '$1'" ;;
esac
[ $# -eq 2 ] || die_usage "expected 2 arguments, got $#"
repo=$1
dir=$2
# A repo id is "name" or "owner/name"; catching a pasted URL here beats a
# confusing 404 later.
case $repo in
'' | /* | */ | */*/* | *[!A-Za-z0-9._/-]*) die_usage "'$repo' is not a repo id such as Qwen/Qwen2.5-0.5B-Instruct" ;;
esac
[ -n "$dir" ] || die_usage "DIR is empty"

endpoint=${HF_ENDPOINT:-https://huggingface.co}
endpoint=${endpoint%/}
run=${RUN:-$(dirname "$0")/../run}

if command -v curl >/dev/null 2>&1; then
    tool=curl
elif command -v wget >/dev/null 2>&1; then
    tool=wget
else
    die "needs curl or wget (sudo apt-get install curl)"
fi

# Scratch files: the headers of the last answer, and the token in a file of
# our own, so that it never shows on a command line (other users can read
# those with ps).
tmp=$(mktemp -d) || die "cannot create a temporary folder"
# The folders this run creates for DIR (DIR and any missing parents), removed
# again on the way out while they are empty: a download that fails before
# its first byte (no network) leaves nothing behind.
# (One folder a line, the deepest first.)
made=
cleanup() {
    rm -rf "$tmp"
    IFS='
'
    for d in $made; do rmdir "$d" 2>/dev/null || break; done
}
trap cleanup EXIT
trap 'say "interrupted; run the same command again to resume"; exit 130' INT
trap 'exit 143' TERM
if [ -n "$HF_TOKEN" ]; then
    # A bearer token is letters, digits and -._~+/ (RFC 6750); anything else
    # would break the header, and is most likely a pasting accident.
    case $HF_TOKEN in
    *[!A-Za-z0-9._~+/=-]*) die "HF_TOKEN holds characters a token cannot have (spaces, quotes?)" ;;
    esac
    (
        umask 077
        echo "header = \"Authorization: Bearer $HF_TOKEN\"" >"$tmp/curlrc"
        echo "header = Authorization: Bearer $HF_TOKEN" >"$tmp/wgetrc"
    ) || die "cannot write to $tmp"
fi

# ---- one request, with curl or wget ----
#
# Neither tool follows redirects by itself: probe() does, so that the token
# goes only to the endpoint's own host, as a browser would do. (wget would
# send it on to any host a redirect names, such as the hub's CDN.)
# With a token, wget reads it from a startup file given with --config,
# which replaces ~/.wgetrc for that request; proxy variables still apply.

# http_head URL AUTH: writes the answer's status line and headers to
# $tmp/headers, which stays empty when there is no answer. AUTH is yes when
# the request may carry the token.
http_head() {
    head_url=$1
    head_auth=$2
    set -- # the options that depend on the case
    if [ "$tool" = curl ]; then
        [ "$head_auth" = yes ] && [ -n "$HF_TOKEN" ] && set -- --config "$tmp/curlrc"
        curl -s -I --connect-timeout 30 --max-time 120 "$@" "$head_url" 2>/dev/null </dev/null |
            tr -d '\r' >"$tmp/headers"
    else
        [ "$head_auth" = yes ] && [ -n "$HF_TOKEN" ] && set -- --config="$tmp/wgetrc"
        # -S prints the headers on stderr, two spaces in.
        wget -S --spider --max-redirect=0 --tries=1 --timeout=30 "$@" "$head_url" 2>&1 </dev/null |
            tr -d '\r' | sed -n 's/^  //p' >"$tmp/headers"
    fi
}

# http_get URL AUTH OUT: appends the rest of URL's bytes to the file OUT
# (resuming from its current size), with a progress bar on a terminal.
# Returns 0 done, 1 broken off (worth resuming), 2 an HTTP error,
# 3 a write error, 4 the server cannot resume (OUT must go).
http_get() {
    get_url=$1
    get_auth=$2
    out=$3
    set --
    if [ "$tool" = curl ]; then
        [ "$get_auth" = yes ] && [ -n "$HF_TOKEN" ] && set -- --config "$tmp/curlrc"
        if [ -t 2 ]; then set -- "$@" -#; else set -- "$@" -s; fi
        # -y/-Y: give up on a connection that stalls for a minute.
        curl -f -C - -y 60 -Y 1 --connect-timeout 30 "$@" -o "$out" "$get_url" </dev/null
        case $? in
        0) return 0 ;;
        22) return 2 ;;
        23) return 3 ;;
        33) return 4 ;;
        *) return 1 ;;
        esac
    else
        [ "$get_auth" = yes ] && [ -n "$HF_TOKEN" ] && set -- --config="$tmp/wgetrc"
        if [ -t 2 ]; then set -- "$@" -q --show-progress; else set -- "$@" -q; fi
        wget -c --max-redirect=0 --tries=1 --timeout=60 "$@" -O "$out" "$get_url" </dev/null
        case $? in
        0) return 0 ;;
        3) return 3 ;;
        6 | 8) return 2 ;;
        *) return 1 ;;
        esac
    fi
}

# ---- what the server says about a file ----

# header NAME: the value of header NAME in the last answer of $tmp/headers.
header() {
    awk -v name="$1:" '/^HTTP\// { v = "" } tolower($1) == name { v = $2 } END { print v }' "$tmp/headers"
}

# origin URL: its scheme://host[:port] part.
origin() { echo "$1" | sed 's|^\([a-z]*://[^/]*\).*|\1|'; }

# probe FILE: asks the server about FILE without fetching it, following
# redirects. Sets STATUS (of the last answer, empty when the server cannot
# be reached), ERRCODE (the hub's X-Error-Code), SIZE (the final answer's
# Content-Length, or the hub's X-Linked-Size from a redirect: the hub
# redirects large files to a CDN and announces their size there), and URL
# and AUTH, the address of the bytes and whether it gets the token.
probe() {
    URL=$endpoint/$repo/resolve/main/$1
    AUTH=yes
    linked=
    hops=0
    while :; do
        http_head "$URL" "$AUTH"
        STATUS=$(awk '/^HTTP\// { s = $2 } END { print s }' "$tmp/headers")
        case $STATUS in
        301 | 302 | 303 | 307 | 308) ;;
        *) break ;;
        esac
        [ -n "$linked" ] || linked=$(header x-linked-size)
        location=$(header location)
        case $location in
        http://* | https://*) URL=$location ;;
        /*) URL=$(origin "$URL")$location ;;
        *) URL=${URL%/*}/$location ;;
        esac
        [ "$(origin "$URL")" = "$(origin "$endpoint")" ] || AUTH=no
        hops=$((hops + 1))
        [ "$hops" -le 10 ] || die "too many redirects for $repo/$1 on $endpoint"
    done
    ERRCODE=$(header x-error-code)
    SIZE=$(header content-length)
    [ -n "$SIZE" ] || SIZE=$linked
    # A CDN may sign its URLs for GET only and refuse a HEAD with 403; the
    # hub's own answer has said that the file is there, and how big.
    if [ "$STATUS" = 403 ] && [ "$AUTH" = no ] && [ -n "$linked" ]; then
        STATUS=200
        SIZE=$linked
    fi
}

# fail_status FILE: dies with the message that fits the last probe's answer.
fail_status() {
    [ -n "$STATUS" ] || die "cannot connect to $endpoint (no network, or a wrong HF_ENDPOINT?)"
    # The hub answers 401 both for a missing repo and for a gated or private
    # one when no token is sent; X-Error-Code tells them apart.
    case $ERRCODE in
    RepoNotFound)
        [ -n "$HF_TOKEN" ] || die "repo $repo not found on $endpoint: wrong repo id? (a private repo needs HF_TOKEN)"
        die "repo $repo not found on $endpoint, or HF_TOKEN cannot see it: wrong repo id?"
        ;;
    EntryNotFound) die "$1 not found in repo $repo on $endpoint" ;;
    esac
    case $STATUS in
    401 | 403)
        [ -n "$HF_TOKEN" ] || die "$repo is gated or private (HTTP $STATUS): accept its terms on $endpoint/$repo and set HF_TOKEN to an access token"
        [ "$STATUS" = 401 ] && die "HF_TOKEN was refused by $endpoint (HTTP 401): is it mistyped or expired?"
        die "HF_TOKEN has no access to $repo (HTTP 403): accept its terms on $endpoint/$repo with the token's account"
        ;;
    404)
        [ "$1" = config.json ] && die "$repo not found on $endpoint (no config.json): wrong repo id?"
        die "$1 not found in repo $repo on $endpoint"
        ;;
    esac
    die "$endpoint answered HTTP $STATUS for $repo/$1"
}

# require FILE: probes FILE and dies unless it is there with a known size.
require() {
    probe "$1"
    accept "$1"
}

# accept FILE: dies unless the last probe found FILE, with a known size.
accept() {
    [ "$STATUS" = 200 ] || fail_status "$1"
    case $SIZE in
    '' | *[!0-9]*) die "$endpoint did not say the size of $repo/$1, so its download cannot be checked" ;;
    esac
}

# ---- local files ----

# size FILE: its length in bytes; 0 when it is missing or not a regular file.
size() {
    # shellcheck disable=SC2012 # ls -n is the POSIX way to a regular file's size
    if [ -f "$1" ]; then ls -lnL "$1" | awk '{ print $5 }'; else echo 0; fi
}

# human BYTES: the size for people, e.g. "942.3 MB".
human() {
    awk -v n="$1" 'BEGIN {
        if (n >= 1e9) printf "%.1f GB\n", n / 1e9
        else if (n >= 1e6) printf "%.1f MB\n", n / 1e6
        else if (n >= 1e3) printf "%.1f kB\n", n / 1e3
        else printf "%d bytes\n", n }'
}

# free_bytes: the space left on DIR's file system, empty if df cannot tell.
free_bytes() {
    df -Pk "$dir" 2>/dev/null | awk 'NR == 2 && $4 ~ /^[0-9]+$/ { printf "%.0f\n", $4 * 1024 }'
}

# fetch FILE SIZE: makes DIR/FILE a complete copy of FILE, which has SIZE bytes.
fetch() {
    dest=$dir/$1
    part=$dest.part
    if [ -f "$dest" ]; then
        have=$(size "$dest")
        [ "$have" = "$2" ] && say "$1: complete, skipped" && return
        say "$1: has $have bytes where the server has $2; fetching it again"
        rm -f "$dest"
    fi
    [ "$(size "$part")" -le "$2" ] || rm -f "$part"
    say "$1: fetching $(human "$2")"
    attempt=1
    # Each attempt asks for the rest of the file; a dropped connection costs
    # only what had not arrived yet.
    while [ "$(size "$part")" -lt "$2" ]; do
        probe "$1"
        [ "$STATUS" = 200 ] || fail_status "$1"
        http_get "$URL" "$AUTH" "$part"
        case $? in
        0) break ;;
        1) why="broke off at $(human "$(size "$part")"), resuming" ;;
        2)
            # Say why, in the words of the server's answer to a probe.
            probe "$1"
            [ "$STATUS" = 200 ] || fail_status "$1"
            why="the server refused it, then offered it again; retrying"
            ;;
        3)
            free=$(free_bytes)
            die "cannot write $part: disk full?${free:+ ($(human "$free") free)}"
            ;;
        4)
            rm -f "$part"
            why="the server cannot resume it; starting again"
            ;;
        esac
        [ "$attempt" -lt 5 ] || die "$1: the download failed $attempt times; run the same command again to resume"
        say "$1: $why"
        sleep $(((attempt - 1) * 2))
        attempt=$((attempt + 1))
    done
    have=$(size "$part")
    if [ "$have" != "$2" ]; then
        rm -f "$part"
        die "$1: got $have bytes but the server announced $2; the download was discarded"
    fi
    mv -f "$part" "$dest" || die "cannot rename $part to $dest"
}

# ---- the plan: which files, how big ----

d=$dir
while [ ! -d "$d" ] && [ "$d" != . ] && [ "$d" != / ]; do
    made="$made
$d"
    d=$(dirname "$d")
done
mkdir -p "$dir" || die "cannot create $dir"
say "$repo from $endpoint into $dir (with $tool)"

# Words "FILE:SIZE", in download order: small files first, so that a
# problem with them shows before the long wait for the weights. (File names
# here never hold spaces or colons.)
plan=
add() { plan="$plan $1:$SIZE"; }

require config.json # first: it tells at once whether the repo is there
add config.json
for f in tokenizer.json tokenizer_config.json; do
    require "$f"
    add "$f"
done
probe generation_config.json
if [ "$STATUS" = 404 ]; then
    say "generation_config.json: not in the repo (it is optional)"
else
    accept generation_config.json
    add generation_config.json
fi

probe model.safetensors
if [ "$STATUS" = 404 ]; then
    # A sharded checkpoint: the index maps each tensor to its shard file.
    index=model.safetensors.index.json
    require "$index"
    fetch "$index" "$SIZE"
    # Shard names are the index's values ending in .safetensors; splitting
    # the JSON at commas and braces puts each "tensor": "shard" pair on a
    # line of its own, however the file is laid out.
    # shellcheck disable=SC2020 # three characters, each to a newline
    shards=$(tr ',{}' '\n\n\n' <"$dir/$index" |
        sed -n 's/^.*:[[:space:]]*"\([A-Za-z0-9._-]*\.safetensors\)"[[:space:]]*$/\1/p' | sort -u)
    [ -n "$shards" ] || die "$dir/$index names no .safetensors shards"
    for f in $shards; do
        require "$f"
        add "$f"
    done
else
    accept model.safetensors
    add model.safetensors
fi

# Check the space for what is still missing before the long download, rather
# than fail with a full disk at the end.
need=0
for item in $plan; do
    f=${item%:*}
    bytes=${item#*:}
    [ "$(size "$dir/$f")" = "$bytes" ] || need=$((need + bytes - $(size "$dir/$f.part")))
done
free=$(free_bytes)
if [ -n "$free" ] && [ "$need" -gt "$free" ]; then
    die "not enough space in $dir: the download needs $(human "$need"), $(human "$free") free"
fi

# ---- the download ----

for item in $plan; do
    fetch "${item%:*}" "${item#*:}"
done

# ---- the check: can run load it? ----

if [ ! -x "$run" ]; then
    say "downloaded, but not checked: $run is not built yet (make)"
    exit 0
fi
if ! msg=$("$run" info --check "$dir" 2>&1 >/dev/null); then
    die "$run info --check rejects $dir: ${msg#run: }"
fi
say "$dir is complete, and $run info --check accepts it"
