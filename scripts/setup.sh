#!/bin/sh
# scripts/setup.sh - installs what building and testing run needs on Debian
# or Ubuntu: a C compiler and make (build-essential), curl (downloads) and
# python3 (the tests' local web server). It uses sudo unless run as root,
# and does nothing when everything is there already.
set -e
missing=
for tool in cc make curl python3 gzip; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -z "$missing" ]; then
    echo "setup: the build tools are installed"
    exit 0
fi
echo "setup: installing build-essential, curl and python3 (missing:$missing)"
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update
$sudo apt-get install -y build-essential curl python3
