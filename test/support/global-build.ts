/**
 * Vitest global setup: the spawned CLI tests run the built binary (`dist/cli.js`, what the package
 * ships), so `dist/` is rebuilt first (JavaScript only, about a second) when a file under `src/`
 * is newer than it: a test never runs stale code.
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export default function setup(): void {
  const root = fileURLToPath(new URL('../../', import.meta.url))
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: root, stdio: 'inherit' })
}
