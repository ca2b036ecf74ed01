#!/usr/bin/env bash
# Packs the package and installs it, with its own msw, vitest and TypeScript, into a fresh
# project outside this tree; that project must type-check and pass a test using the public API.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$root"
npm run build --silent
tarball="$(npm pack --silent --pack-destination "$work" | tail -n 1)"

mkdir "$work/consumer"
cp -r "$root/test/package-consumer/." "$work/consumer/"
cd "$work/consumer"
msw_version="$(node -p "require('$root/node_modules/msw/package.json').version")"
vitest_version="$(node -p "require('$root/node_modules/vitest/package.json').version")"
ts_version="$(node -p "require('$root/node_modules/typescript/package.json').version")"
npm install --no-audit --no-fund --silent "$work/$tarball" "msw@$msw_version" "vitest@$vitest_version" "typescript@$ts_version" "@types/node@20" >/dev/null
npx tsc -p tsconfig.json
# Its results join the main suite's in CI's closing "N passed, N failed" line.
npx vitest run --reporter=default --reporter=json --outputFile="$root/test-results/package-consumer.json"
echo "package check: the packed $(basename "$tarball") type-checks and passes in a fresh project with msw $msw_version"

# Again with the oldest msw the peer dependency allows.
msw_floor="$(node -p "require('$root/package.json').peerDependencies.msw.replace(/^\\^/, '')")"
npm install --no-audit --no-fund --silent "msw@$msw_floor" >/dev/null
npx tsc -p tsconfig.json
npx vitest run --reporter=default --reporter=json --outputFile="$root/test-results/package-consumer-msw-floor.json"
echo "package check: and with msw $msw_floor, the oldest the peer dependency allows"
