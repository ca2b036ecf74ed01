#!/usr/bin/env bash
# Packs the package once (`npm pack` builds it through `prepare`) and installs the tarball into
# fresh projects outside this tree, one per stack teams use; each must type-check and pass its
# tests. Every run writes a report to test-results/consumer-<name>.json (JUnit XML in
# consumer-<name>.xml for `node --test` and `bun test`), which CI's closing "N passed, N failed"
# line adds up (a missing report counts as a failure).
#
#   bash scripts/check-package.sh                 every section
#   bash scripts/check-package.sh jest29 browser  some of them
#
# Sections:
#   start      the README's quick start: after `npm ci`, `npm start` serves the default scenario
#              at once, without compiling
#   publish    `npm publish --dry-run` warns of nothing but the missing login; the tarball holds
#              every build, no source map, and zod and @msw/data bundled
#   vitest     the msw of this repo, then the peer range's floor
#   msw3       msw 3 on Node 22 and 24 (Node from the npm registry's `node` package)
#   jest29, jest30   ts-jest (moduleResolution node, node16) and @swc/jest, jsdom
#   react      Vitest + jsdom + Testing Library
#   browser    a Vite build of a page with the worker (no warning, no `node:`), then Playwright
#              with @msw/playwright in Debian's Chromium, against the build and Vite's dev server
#   storybook  msw-storybook-addon, a story per scenario, each opened in Chromium
#   node-test  `node --test` (ESM JavaScript, type-checked with checkJs), msw's setupServer; a JUnit
#              report (consumer-node-test.xml)
#   vitest-browser   Vitest browser mode in Debian's Chromium (@vitest/browser-playwright), the
#              petstore in msw's Service Worker (setupPetstoreWorker)
#   vue        Vue 3 single-file component, Vitest + jsdom + @testing-library/vue, vue-tsc
#   next       Next.js App Router: server-side fetches to `petstore-sandbox serve`, the browser's to the
#              worker (next/dynamic with ssr: false, started once); `next build` prints no warning;
#              Playwright in Chromium against `next start`, then `next dev`
#   angular    Angular's `ng test` (the unit-test builder with Vitest and jsdom), HttpClient; Angular 22
#              needs Node 22 (from the npm registry's `node` package, as for msw3)
#   bun        `bun test` with msw 2 (the `bun` npm package carries Bun's binary); a JUnit report
#              (consumer-bun.xml)
#   pact       @pactflow/pact-msw-adapter records the petstore's answers as a Pact file (Node 22, which
#              the adapter needs); a second run checks the file against the package's OpenAPI document;
#              with msw 2, then msw 3
#   contract-tools   Spectral (spectral:oas), Dredd and Portman (with newman), each from the registry
#              at the versions of the project's package-lock.json, on the OpenAPI document
#              `petstore-sandbox serve` serves, and Dredd and Portman against that server; a JUnit
#              report (consumer-contract-tools.xml) and Dredd's and newman's own
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
results="$root/test-results"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$results"
SECTIONS=(start publish vitest msw3 jest29 jest30 react browser storybook node-test vitest-browser vue next angular bun pact contract-tools)
asked=("$@")
[ ${#asked[@]} -eq 0 ] && asked=("${SECTIONS[@]}")

version() { node -p "require('$root/node_modules/$1/package.json').version"; }
MSW="$(version msw)"
VITEST="$(version vitest)"
TS="$(version typescript)"

cd "$root"
# PACKAGE_TARBALL runs the consumers against another build (an older release, to see them fail).
if [ -n "${PACKAGE_TARBALL:-}" ]; then
  tarball="$PACKAGE_TARBALL"
else
  tarball="$work/$(npm pack --silent --pack-destination "$work" 2>/dev/null | tail -n 1)"
fi
[ -f "$tarball" ] || { echo "package check: npm pack produced no tarball"; exit 1; }

# A fresh project from test/consumers/<name> (or test/package-consumer), with the tarball and `packages` installed.
consumer() {
  local from="$1" name="$2"
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  cp -r "$from/." "$dir/"
  cd "$dir"
  npm install --no-audit --no-fund --silent --no-package-lock "$tarball" "$@" >/dev/null 2>"$dir/npm-install.log" ||
    { cat "$dir/npm-install.log"; return 1; }
}

section_start() {
  cd "$root"
  local log="$work/start.log" pid tries=0
  : >"$log"
  # Port 0: a free one (the README's 4010 may be taken on a shared machine); the rest as written.
  PETSTORE_SANDBOX_PORT=0 setsid npm start >"$log" 2>&1 &
  pid=$!
  until grep -q "is running" "$log" || [ $tries -ge 100 ]; do sleep 0.2; tries=$((tries + 1)); done
  kill -- -"$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local api
  api="$(grep -oE "API +http://[^ ]+" "$log" | head -n 1)"
  if ! grep -q "scenario   default" "$log" || [ -z "$api" ]; then
    cat "$log"
    echo "package check: npm start did not serve the default scenario within 20 s"
    return 1
  fi
  if grep -nE "tsc|building dist" "$log"; then
    echo "package check: npm start compiled although dist/ is up to date"
    return 1
  fi
  echo "package check: npm start served the default scenario after $((tries / 5)) s, without compiling"
}

section_publish() {
  cd "$root"
  local log="$work/publish.log"
  npm publish --dry-run >"$log" 2>&1 || { cat "$log"; return 1; }
  if grep -i "warn" "$log" | grep -v "Unknown env config\|Unknown user config" | grep -v "requires you to be logged in"; then
    echo "package check: npm publish --dry-run warns"
    return 1
  fi
  local listing expected missing=0
  listing="$(tar -tzf "$tarball")"
  for expected in dist/cli.js dist/index.js dist/node.js dist/server.js dist/web/browser.js dist/web/index.js \
    dist/cjs/index.js dist/cjs/node.js dist/cjs/package.json dist/types/index.d.ts dist/cjs/types/node.d.ts \
    dist/vitest.js dist/web/vitest.js dist/types/vitest.d.ts dist/jest.js dist/cjs/jest.js dist/cjs/types/jest.d.ts; do
    grep -qx "package/$expected" <<<"$listing" || { echo "package check: the tarball lacks $expected"; missing=1; }
  done
  # The import cost (`npm run bench -- import`) rests on the bundle: a process loads a few files,
  # not zod's and @msw/data's hundreds.
  local unbundled
  unbundled="$(tar -xzOf "$tarball" --wildcards 'package/dist/*.js' | grep -cE "(from|require\()\s*['\"](zod|@msw/data|mutative|es-toolkit)['\"/]")"
  if [ "$unbundled" -gt 0 ]; then
    echo "package check: the built entries import zod or @msw/data at run time ($unbundled imports) instead of bundling them"
    missing=1
  fi
  if grep -E "\.map$" <<<"$listing"; then
    echo "package check: the tarball ships source maps"
    missing=1
  fi
  [ "$missing" -eq 0 ] && echo "package check: npm publish --dry-run is clean; the tarball holds every build"
}

section_vitest() {
  consumer "$root/test/package-consumer" vitest "msw@$MSW" "vitest@$VITEST" "typescript@$TS" "@types/node@20" || return 1
  npx tsc -p tsconfig.json &&
    npx vitest run --reporter=default --reporter=json --outputFile="$results/consumer-vitest.json" || return 1
  # Again with the oldest msw the peer range allows.
  local floor
  floor="$(node -p "require('$root/package.json').peerDependencies.msw.split('||')[0].trim().replace(/^\\^/, '')")"
  npm install --no-audit --no-fund --silent --no-package-lock "msw@$floor" >/dev/null 2>&1 &&
    npx tsc -p tsconfig.json &&
    npx vitest run --reporter=default --reporter=json --outputFile="$results/consumer-vitest-msw-floor.json" &&
    echo "package check: vitest consumer passes with msw $MSW and $floor"
}

section_msw3() {
  # msw 3 needs Node 22.12 or later; Node itself comes from the npm registry's `node` package,
  # whose tarball carries the binary.
  local msw3
  msw3="$(node -p "require('$root/package.json').peerDependencies.msw.split('||').pop().trim()")"
  consumer "$root/test/package-consumer" msw3 "msw@$msw3" "vitest@$VITEST" "typescript@$TS" "@types/node@22" || return 1
  npx tsc -p tsconfig.json || return 1
  local major node status=0
  for major in 22 24; do
    node="$(npx --yes -p "node@$major" node -p process.execPath 2>/dev/null | tail -n 1)"
    [ -x "$node" ] || { echo "package check: no Node $major from the npm registry"; status=1; continue; }
    "$node" node_modules/vitest/vitest.mjs run --reporter=default --reporter=json \
      --outputFile="$results/consumer-msw3-node$major.json" || status=1
    echo "package check: msw $(node -p "require('./node_modules/msw/package.json').version") on Node $("$node" -v)"
  done
  return "$status"
}

# Jest as msw documents it, with ts-jest (moduleResolution node and node16) and @swc/jest.
jest_section() {
  local major="$1"
  consumer "$root/test/consumers/jest" "jest$major" "msw@$MSW" "jest@$major" "jest-environment-jsdom@$major" "@types/jest@$major" \
    jest-fixed-jsdom@0.0.11 ts-jest@29 @swc/jest@0.2 @swc/core@1 "typescript@$TS" "@types/node@20" || return 1
  # Comments aside: the config itself says why it names nothing of ours.
  if grep -vE '^\s*//' jest.config.js | grep -nE "petstore|@msw/data|zod|mutative|es-toolkit"; then
    echo "package check: the Jest config must not name petstore-sandbox or its dependencies"
    return 1
  fi
  npx tsc -p tsconfig.node10.json && npx tsc -p tsconfig.node16.json || return 1
  local transform status=0
  for transform in ts-jest-node10 ts-jest-node16 swc; do
    JEST_TRANSFORM="$transform" npx jest --json --outputFile="$results/consumer-jest$major-$transform.json" || status=1
  done
  echo "package check: Jest $(node -p "require('jest/package.json').version") with ts-jest (node, node16) and @swc/jest"
  return "$status"
}
section_jest29() { jest_section 29; }
section_jest30() { jest_section 30; }

section_react() {
  consumer "$root/test/consumers/react" react "msw@$MSW" "vitest@$VITEST" "typescript@$TS" jsdom@26 \
    @testing-library/react@16 @testing-library/dom@10 react@19 react-dom@19 @types/react@19 @types/react-dom@19 || return 1
  npx tsc -p tsconfig.json &&
    npx vitest run --reporter=default --reporter=json --outputFile="$results/consumer-react.json"
}

section_browser() {
  consumer "$root/test/consumers/browser" browser "msw@$MSW" "typescript@$TS" vite@8 @playwright/test@1 @msw/playwright@0.6 "@types/node@20" || return 1
  # npm 11 skips msw's postinstall; `msw init` copies the worker script as docs/browser.md says.
  npx msw init public --save=false >/dev/null || return 1
  npx tsc -p tsconfig.json || return 1
  local log="$work/vite-build.log"
  ./node_modules/.bin/vite build >"$log" 2>&1 || { cat "$log"; return 1; }
  cat "$log"
  # The browser entry must build cleanly: no warning at all (Vite's "externalized for browser
  # compatibility" and its advisory about chunks over 500 kB among them) and no `node:` module in
  # what ships.
  if grep -niE "warn|externalized|\(!\)|larger than" "$log"; then
    echo "package check: the Vite build of petstore-sandbox/browser printed a warning"
    return 1
  fi
  if grep -l "node:" dist/assets/*.js; then
    echo "package check: the browser bundle holds a node: module"
    return 1
  fi
  PLAYWRIGHT_JSON_OUTPUT_NAME="$results/consumer-browser.json" npx playwright test --reporter=list,json || return 1
  # Again on Vite's development server, where docs/browser.md's recipe runs the worker.
  VITE_DEV=1 PLAYWRIGHT_JSON_OUTPUT_NAME="$results/consumer-browser-dev.json" npx playwright test --reporter=list,json
}

section_storybook() {
  consumer "$root/test/consumers/storybook" storybook "msw@$MSW" "typescript@$TS" vite@8 storybook@10 @storybook/react-vite@10 \
    msw-storybook-addon@3 react@19 react-dom@19 @types/react@19 @playwright/test@1 "@types/node@20" || return 1
  npx msw init public --save=false >/dev/null || return 1
  npx tsc -p tsconfig.json || return 1
  local log="$work/storybook-build.log"
  npx storybook build --quiet --disable-telemetry --output-dir storybook-static >"$log" 2>&1 || { tail -n 40 "$log"; return 1; }
  # Each story opened in Debian's Chromium, with its scenario served by msw-storybook-addon.
  PLAYWRIGHT_JSON_OUTPUT_NAME="$results/consumer-storybook.json" npx playwright test --reporter=list,json
}

section_node-test() {
  consumer "$root/test/consumers/node-test" node-test "msw@$MSW" "typescript@$TS" "@types/node@20" || return 1
  npx tsc -p tsconfig.json || return 1
  # Node's own runner and reporters: spec on the console, JUnit XML for CI's closing line.
  node --test --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=junit --test-reporter-destination="$results/consumer-node-test.xml"
}

section_vitest-browser() {
  consumer "$root/test/consumers/vitest-browser" vitest-browser "msw@$MSW" "vitest@$VITEST" "@vitest/browser-playwright@$VITEST" \
    playwright@1 "typescript@$TS" || return 1
  npx msw init public --save=false >/dev/null || return 1
  npx tsc -p tsconfig.json &&
    npx vitest run --reporter=default --reporter=json --outputFile="$results/consumer-vitest-browser.json"
}

section_vue() {
  consumer "$root/test/consumers/vue" vue "msw@$MSW" "vitest@$VITEST" "typescript@$TS" jsdom@26 vue@3 @vitejs/plugin-vue@6 \
    vue-tsc@3 @testing-library/vue@8 || return 1
  npx vue-tsc -p tsconfig.json &&
    npx vitest run --reporter=default --reporter=json --outputFile="$results/consumer-vue.json"
}

section_next() {
  consumer "$root/test/consumers/next" next "msw@$MSW" "typescript@$TS" next@16 react@19 react-dom@19 @types/react@19 \
    @playwright/test@1 "@types/node@20" || return 1
  npx msw init public --save=false >/dev/null || return 1
  export NEXT_TELEMETRY_DISABLED=1 NEXT_PUBLIC_API_MOCKING=enabled
  local log="$work/next-build.log"
  npx next build >"$log" 2>&1 || { cat "$log"; return 1; }
  cat "$log"
  # Clean: no warning (Next marks them ⚠) and no module it cannot resolve (msw/browser on the server).
  # @note One warning is about the CI machine, not the app: with CI set, Next asks for a build
  # cache (`.next/cache`) kept between runs; a fresh project never has one.
  if grep -vF "No build cache found" "$log" | grep -niE "⚠|warn|can't resolve|cannot resolve"; then
    echo "package check: next build printed a warning"
    return 1
  fi
  npx tsc -p tsconfig.json || return 1
  PLAYWRIGHT_JSON_OUTPUT_NAME="$results/consumer-next.json" npx playwright test --reporter=list,json || return 1
  # Again on `next dev`, where React's StrictMode runs the worker's effect twice.
  NEXT_DEV=1 PLAYWRIGHT_JSON_OUTPUT_NAME="$results/consumer-next-dev.json" npx playwright test --reporter=list,json
}

section_angular() {
  local node
  node="$(npx --yes -p node@22 node -p process.execPath 2>/dev/null | tail -n 1)"
  [ -x "$node" ] || { echo "package check: no Node 22 from the npm registry"; return 1; }
  consumer "$root/test/consumers/angular" angular "msw@$MSW" "vitest@$VITEST" jsdom@27 typescript@~6.0 @angular/core@22 \
    @angular/common@22 @angular/compiler@22 @angular/platform-browser@22 @angular/build@22 @angular/cli@22 \
    @angular/compiler-cli@22 rxjs@7 tslib@2 || return 1
  NG_CLI_ANALYTICS=false "$node" node_modules/@angular/cli/bin/ng.js test --watch=false --reporters=default --reporters=json \
    --output-file="$results/consumer-angular.json"
  echo "package check: Angular $(node -p "require('./node_modules/@angular/core/package.json').version") on Node $("$node" -v)"
}

section_bun() {
  # msw 2: under Bun, msw 3's interceptors fail to install ("Failed to replace a global value at
  # _wrapHandle") and every request reaches the network.
  consumer "$root/test/consumers/bun" bun "msw@$MSW" bun@1 @types/bun@1 "typescript@$TS" || return 1
  npx tsc -p tsconfig.json || return 1
  ./node_modules/.bin/bun test --reporter=junit --reporter-outfile="$results/consumer-bun.xml" || return 1
  echo "package check: bun test with msw $(node -p "require('./node_modules/msw/package.json').version") on Bun $(./node_modules/.bin/bun --version)"
}

section_pact() {
  local node
  node="$(npx --yes -p node@22 node -p process.execPath 2>/dev/null | tail -n 1)"
  [ -x "$node" ] || { echo "package check: no Node 22 from the npm registry"; return 1; }
  consumer "$root/test/consumers/pact" pact "msw@$MSW" "vitest@$VITEST" @pactflow/pact-msw-adapter@4 "typescript@$TS" "@types/node@22" || return 1
  npx tsc -p tsconfig.json || return 1
  pact_run() {
    rm -rf pacts
    "$node" node_modules/vitest/vitest.mjs run src/categories.pact.test.ts --reporter=default --reporter=json \
      --outputFile="$results/consumer-pact$1.json" || return 1
    "$node" node_modules/vitest/vitest.mjs run src/pact-file.test.ts --reporter=default --reporter=json \
      --outputFile="$results/consumer-pact-file$1.json"
  }
  pact_run "" || return 1
  # Again with msw 3.
  local msw3
  msw3="$(node -p "require('$root/package.json').peerDependencies.msw.split('||').pop().trim()")"
  npm install --no-audit --no-fund --silent --no-package-lock "msw@$msw3" >/dev/null 2>&1 && npx tsc -p tsconfig.json && pact_run -msw3 &&
    echo "package check: the Pact adapter records the petstore with msw $MSW and $(node -p "require('./node_modules/msw/package.json').version")"
}

section_contract-tools() {
  # The tools at the versions of the project's own lockfile (they bring some 600 packages), then
  # the tarball beside them.
  local dir="$work/contract-tools"
  mkdir -p "$dir"
  cp -r "$root/test/consumers/contract-tools/." "$dir/"
  cd "$dir"
  { npm ci --no-audit --no-fund --silent && npm install --no-audit --no-fund --silent --no-save "$tarball" "msw@$MSW"; } \
    >/dev/null 2>"$dir/npm-install.log" || { cat "$dir/npm-install.log"; return 1; }
  RESULTS_DIR="$results" node --test --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=junit --test-reporter-destination="$results/consumer-contract-tools.xml" contract-tools.test.mjs || return 1
  echo "package check: Spectral $(node -p "require('@stoplight/spectral-cli/package.json').version"), Dredd $(node -p "require('dredd/package.json').version") and Portman $(node -p "require('@apideck/portman/package.json').version") find nothing wrong with the served document"
}

status=0
for section in "${asked[@]}"; do
  if ! declare -F "section_$section" >/dev/null; then
    echo "package check: unknown section $section (known: ${SECTIONS[*]})"
    exit 1
  fi
  start=$SECONDS
  ( "section_$section" ) || { echo "package check: $section FAILED"; status=1; }
  echo "package check: $section took $((SECONDS - start)) s"
done
exit "$status"
