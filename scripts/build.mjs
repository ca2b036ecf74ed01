// `npm run build`: the package's dist/, with esbuild for the code and tsc for the types.
//
//   dist/*.js      ESM for Node.js: every entry, shared chunks beside them (the CLI, `serve`)
//   dist/web/*.js  ESM for browsers (`browser` condition, `./browser`): no `node:` import
//   dist/cjs/*.js  CommonJS for `require` (Jest): the library entries and the Jest matchers, with copies of the types
//   dist/types/    the types, from tsc (and a copy in dist/cjs/types/)
//
// Peer dependencies (msw, better-sqlite3) and express (CommonJS, loaded on first use) stay
// external; ESM-only @msw/data, yargs (the CLI's) and the rest are bundled in, so `require` works and a
// process loads one file instead of hundreds. `npm start` (scripts/start.mjs) and
// `node scripts/build.mjs --if-stale` build the JavaScript only when a source file is newer than
// dist/cli.js.
import { execFileSync } from 'node:child_process'
import { cp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const dist = join(root, 'dist')

/**
 * Never bundled: peers are the user's own (vitest: the matchers' entry registers on the user's); express is CommonJS and Node-only.
 * @note yargs is bundled into dist/cli.js: one file instead of about twenty cuts a sixth of the
 * CPU a start spends before its first answer (docs/decisions/0007). Its messages are then always
 * English, like ours (external, it read its own translations from the locale).
 */
export const EXTERNAL = ['msw', 'msw/*', 'better-sqlite3', 'redis', 'express', 'vitest']

/**
 * Options every build shares. @msw/data calls the global `crypto.randomUUID()`, which Jest 29's
 * jsdom lacks: `define` + `inject` point those calls at `src/core/random-uuid.ts` instead of
 * patching the user's globals.
 */
const common = {
  absWorkingDir: root,
  bundle: true,
  external: EXTERNAL,
  target: 'es2022',
  define: { 'crypto.randomUUID': 'randomUUID' },
  inject: [join(root, 'src/core/random-uuid.ts')],
  legalComments: 'none',
  logLevel: 'warning',
}

/**
 * The browser build reads no files: `scenario-files.ts` becomes `scenario-files.browser.ts`.
 * Also used by the browser tests' fixture build, so they run what the package ships.
 */
export const browserFiles = {
  name: 'browser-scenario-files',
  setup(builder) {
    builder.onResolve({ filter: /\/scenario-files\.js$/ }, (args) => ({
      path: join(args.resolveDir, args.path.replace(/\.js$/, '.browser.ts')),
    }))
  },
}

/** In the CommonJS build, `node` requires the `index` bundle rather than holding a second copy of the core. */
const sharedIndex = {
  name: 'shared-index',
  setup(builder) {
    builder.onResolve({ filter: /^\.\/index\.js$/ }, (args) =>
      args.importer.endsWith(join('src', 'index.ts')) ? undefined : { path: './index.js', external: true },
    )
  },
}

export async function buildJavaScript() {
  // @note Imported here, not at the top: `npm start` imports this file to check whether dist/ is
  // stale, and should not pay for esbuild when it is not.
  const { build } = await import('esbuild')
  await Promise.all([
    build({
      ...common,
      entryPoints: ['src/index.ts', 'src/node.ts', 'src/server.ts', 'src/cli.ts', 'src/vitest.ts', 'src/jest.ts'],
      outdir: dist,
      format: 'esm',
      platform: 'node',
      splitting: true,
      chunkNames: 'chunks/[name]-[hash]',
    }),
    build({
      ...common,
      entryPoints: ['src/index.ts', 'src/browser.ts', 'src/vitest.ts'],
      outdir: join(dist, 'web'),
      format: 'esm',
      platform: 'browser',
      splitting: true,
      chunkNames: 'chunks/[name]-[hash]',
      // @note No top-level await in what browsers get: Vite 5 and 6 (their default build target)
      // and older webpack refuse to build a dependency that has one. esbuild fails on it here.
      supported: { 'top-level-await': false },
      plugins: [browserFiles],
    }),
    build({
      ...common,
      entryPoints: ['src/index.ts', 'src/node.ts', 'src/jest.ts'],
      outdir: join(dist, 'cjs'),
      format: 'cjs',
      platform: 'node',
      plugins: [sharedIndex],
    }),
  ])
  // Files under dist/cjs are CommonJS, whatever the package's own "type" says.
  await writeFile(join(dist, 'cjs/package.json'), '{ "type": "commonjs" }\n')
  await checkRecordIds()
}

/**
 * Fails the build when a `crypto.randomUUID` call was left in what it wrote: `define` matches
 * @msw/data's call only as spelled today, and the memory budget's figure per category
 * (`src/storage/memory-store.ts`) holds for our flat ids, not for Node's (twice the heap).
 */
async function checkRecordIds() {
  const files = (await readdir(dist, { recursive: true })).filter((file) => file.endsWith('.js') || file.endsWith('.cjs'))
  for (const file of files) {
    const text = await readFile(join(dist, file), 'utf8')
    if (text.includes('crypto.randomUUID')) {
      throw new Error(`dist/${file} still calls crypto.randomUUID: the build's define no longer reaches it (see common.define in scripts/build.mjs)`)
    }
  }
}

async function buildTypes() {
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  })
  // The same declarations under dist/cjs, where they describe CommonJS modules (TypeScript's
  // node16 resolution reads a file's format from the nearest package.json).
  await cp(join(dist, 'types'), join(dist, 'cjs/types'), { recursive: true })
}

async function newestSource(dir) {
  let newest = 0
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, (await stat(join(entry.parentPath, entry.name))).mtimeMs)
  }
  return newest
}

/** Whether dist/ is missing or older than a file of src/ (then `npm start` builds the JavaScript first). */
export async function distIsStale() {
  return (await staleness()) !== undefined
}

/** Why dist/ must be built: it is missing, or src/ changed since; undefined when it is current. */
async function staleness() {
  const built = await stat(join(dist, 'cli.js')).then((file) => file.mtimeMs, () => 0)
  if (built === 0) return 'dist/ has not been built yet'
  return (await newestSource(join(root, 'src'))) > built ? 'src/ changed since the last build' : undefined
}

/** Builds the JavaScript when {@link distIsStale}, saying so (and why) on stderr. */
export async function buildIfStale() {
  const why = await staleness()
  if (why === undefined) return
  process.stderr.write(`petstore-sandbox: ${why}; building dist/ (JavaScript only)…\n`)
  await buildJavaScript()
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--if-stale')) {
    await buildIfStale()
  } else {
    await rm(dist, { recursive: true, force: true })
    await mkdir(dist)
    await buildJavaScript()
    await buildTypes()
  }
}
