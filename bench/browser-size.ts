/**
 * The package's share of a browser bundle: `setupPetstoreWorker()` from `petstore-sandbox/browser`
 * against msw's own `setupWorker()`, both bundled for browsers by esbuild (minified, as a
 * production build is) and gzipped; the difference is what the package adds beyond msw. Then the
 * same app code-split, as Vite splits it: how much of the package lands in the chunk msw is in
 * (loaded with the app's mocks), and how much in the package's own chunk, loaded by the
 * entry's dynamic `import()` when a worker is set up.
 */
import { gzipSync } from 'node:zlib'
import { fileURLToPath } from 'node:url'
import { build, type Metafile } from 'esbuild'
import { buildJavaScript } from '../scripts/build.mjs'
import type { Figure } from './lib/figures.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const APP = "import { setupPetstoreWorker } from 'petstore-sandbox/browser'; console.log(setupPetstoreWorker())"

/**
 * @note The target: measured at 55 KB gzipped in one chunk (2026-11-22, esbuild 0.28, msw 2.15):
 * zod (the request and scenario validation the interface needs) about half, then the package's
 * own code, @msw/data and mutative. Since the package loads its core as a chunk of its own
 * (2026-11-23, see `src/browser.ts`), 62 KB: a bundle without code splitting wraps the lazily
 * loaded modules (esbuild's `__esm`), and a split build gzips the chunk apart (Vite 8: 60.6 kB
 * gzipped). 70 KB leaves about 12% for ordinary growth and still fails on the regressions seen
 * while building this: zod's locales coming back (`import { z }` instead of `import * as z`,
 * +65 KB), a second copy of a dependency, or a Node.js module pulled in.
 */
const TARGET_KB = 70

/**
 * @note The target: measured at 1.6 KB minified (2026-11-23): `setupPetstoreWorker()`, the
 * persist check and `PetstoreError` (with its value formatter); everything else waits in the package's own chunk. msw's
 * `setupWorker()` alone makes a 416 kB chunk in a Vite 8 build, 84 kB short of Vite's 500 kB
 * advisory; 4 KB keeps almost all of that margin and fails as soon as the core (zod, the store,
 * the scenarios: about 180 KB) is imported statically again.
 */
const EAGER_TARGET_KB = 4

/** A production browser bundle of `source`, minified, kept in memory. */
function browserBundle(source: string) {
  return {
    stdin: { contents: source, resolveDir: ROOT, loader: 'ts' },
    bundle: true,
    write: false,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    logLevel: 'silent',
  } as const
}

async function gzippedKb(source: string): Promise<{ kb: number; nodeModules: string[] }> {
  const result = await build({ ...browserBundle(source), metafile: true })
  const code = result.outputFiles[0]!.contents
  const nodeModules = Object.keys(result.metafile.inputs).filter((input) => input.startsWith('node:'))
  return { kb: gzipSync(code, { level: 9 }).length / 1024, nodeModules }
}

/** The package's minified bytes in the chunks loaded with the entry (msw's) and in those loaded later. */
async function splitShare(): Promise<{ eagerKb: number; lazyKb: number }> {
  const result = await build({ ...browserBundle(APP), splitting: true, outdir: 'bench-split', metafile: true })
  const outputs: Metafile['outputs'] = result.metafile.outputs
  const entry = Object.keys(outputs).find((path) => outputs[path]!.entryPoint === '<stdin>')!
  // The entry and what it imports statically: what a page loads with `await import('./mocks')`.
  const eager = new Set([entry])
  const pending = [entry]
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    for (const imported of outputs[path]!.imports) {
      if (imported.kind === 'import-statement' && imported.path in outputs && !eager.has(imported.path)) {
        eager.add(imported.path)
        pending.push(imported.path)
      }
    }
  }
  let eagerBytes = 0
  let lazyBytes = 0
  for (const [path, output] of Object.entries(outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      // The package's own files (its bundled zod and @msw/data included), found by the self-reference.
      if (!input.startsWith('dist/web/')) continue
      if (eager.has(path)) eagerBytes += bytesInOutput
      else lazyBytes += bytesInOutput
    }
  }
  return { eagerKb: eagerBytes / 1024, lazyKb: lazyBytes / 1024 }
}

export async function measureBrowserSize(): Promise<Figure[]> {
  await buildJavaScript()
  const msw = await gzippedKb("import { setupWorker } from 'msw/browser'; console.log(setupWorker())")
  const ours = await gzippedKb(APP)
  if (ours.nodeModules.length > 0) throw new Error(`browser-size: the browser entry pulls in ${ours.nodeModules.join(', ')}`)
  const split = await splitShare()
  return [
    {
      section: 'browser-size',
      name: 'petstore-sandbox/browser: the package’s share of the bundle beyond msw (gzipped)',
      value: ours.kb - msw.kb,
      unit: 'KB',
      target: { kind: 'max', value: TARGET_KB },
      detail: `esbuild, minified, gzip -9: setupPetstoreWorker() ${ours.kb.toFixed(1)} KB, msw's setupWorker() alone ${msw.kb.toFixed(1)} KB`,
      command: 'npm run bench -- browser-size',
    },
    {
      section: 'browser-size',
      name: 'petstore-sandbox/browser: the package’s bytes in msw’s chunk (minified)',
      value: split.eagerKb,
      unit: 'KB',
      target: { kind: 'max', value: EAGER_TARGET_KB },
      detail: `esbuild with code splitting, as Vite splits: the rest, ${split.lazyKb.toFixed(0)} KB minified, is the package's own chunk, loaded by a dynamic import() when the worker is set up`,
      command: 'npm run bench -- browser-size',
    },
  ]
}
