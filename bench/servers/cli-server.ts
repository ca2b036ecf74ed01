/**
 * The sandbox as `npm start` runs it, for the throughput bench: the built CLI (`node dist/cli.js
 * serve`, rebuilt first when stale, as `prestart` does) on the default scenario with its request
 * log on, written to a file as a service's output would be (`npm start > sandbox.log`). Only the
 * bench's keys and limits differ: two keys so that creates never lengthen the list the GETs
 * fetch, and a category limit a POST round cannot reach. Prints the CLI's port; SIGTERM stops it.
 *
 *   npx tsx bench/servers/cli-server.ts
 */
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BENCH_KEYS } from './keys.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-log-'))
const logFile = join(dir, 'sandbox.log')
const cli = spawn(
  process.execPath,
  [
    'dist/cli.js', 'serve', '--port', '0',
    '--api-key', BENCH_KEYS.join(','),
    // The same limits as the other bench servers (bench/servers/sandbox-variants.ts).
    '--max-categories', '800000', '--name-max-length', '20', '--description-max-length', '20',
  ],
  { cwd: root, stdio: ['ignore', openSync(logFile, 'w'), 'inherit'] },
)
const stop = () => {
  cli.kill('SIGTERM')
  rmSync(dir, { recursive: true, force: true })
}
process.on('SIGTERM', () => {
  stop()
  process.exit(0)
})
cli.once('exit', (code) => {
  rmSync(dir, { recursive: true, force: true })
  process.exitCode = code ?? 1
  process.exit()
})
for (;;) {
  const port = /API\s+http:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(logFile, 'utf8'))?.[1]
  if (port !== undefined) {
    process.stdout.write(`${port}\n`)
    break
  }
  await new Promise((resolve) => setTimeout(resolve, 50))
}
