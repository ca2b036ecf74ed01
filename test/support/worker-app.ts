/** Builds the browser fixture app with esbuild into a temp dir, next to msw's worker script. */
import { build } from 'esbuild'
import { browserFiles } from '../../scripts/build.mjs'
import { copyFile, mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll } from 'vitest'

const fixtures = join(dirname(fileURLToPath(import.meta.url)), '../browser/fixtures')

/** The directory holding index.html, app.js and mockServiceWorker.js, removed after the suite. */
export function useWorkerApp(): { dir(): string } {
  let dir = ''
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'petstore-worker-app-'))
    await build({
      entryPoints: [join(fixtures, 'app.ts')],
      outfile: join(dir, 'app.js'),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      sourcemap: 'linked',
      // The package's browser build: scenario files are Node-only, so no `node:` module may be
      // reached (esbuild fails the build on one, which is what the browser tests rely on).
      plugins: [browserFiles],
      logLevel: 'silent',
    })
    await copyFile(join(fixtures, 'index.html'), join(dir, 'index.html'))
    // @note npm 11 skips msw's postinstall, so the worker script is copied from the package itself.
    const msw = dirname(createRequire(import.meta.url).resolve('msw/package.json'))
    await copyFile(join(msw, 'lib/mockServiceWorker.js'), join(dir, 'mockServiceWorker.js'))
  })
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true })
  })
  return { dir: () => dir }
}
