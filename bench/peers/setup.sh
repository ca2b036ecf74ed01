#!/usr/bin/env bash
# Installs the peers `npm run bench -- peers` compares the sandbox with, from the npm registry, into
# .bench-peers/ (gitignored, outside the project's dependencies): WireMock (its jar; runs on `java`,
# 17 or later), Prism, json-server 0.17 and Mockoon CLI. Pinned versions, so two runs compare the
# same peers. Re-running it is cheap when they are installed. Usage: bash bench/peers/setup.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/.bench-peers"
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || printf '{ "name": "bench-peers", "private": true }\n' > package.json
# @note Prism 5.15+ asks for Node 24; 5.14.2 is the newest that runs on Node 20.
npm install --no-audit --no-fund --no-save --loglevel=error \
  wiremock@3.13.2 @stoplight/prism-cli@5.14.2 json-server@0.17.4 @mockoon/cli@9.9.0
if ! command -v java >/dev/null; then
  echo "bench/peers/setup.sh: no java on PATH: WireMock will be skipped (apt-get install openjdk-17-jre-headless)" >&2
fi
echo "peers installed in $dir"
