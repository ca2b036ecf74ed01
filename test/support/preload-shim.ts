/**
 * LD_PRELOAD libraries for child processes in tests (a failing disk, a clock off): C source
 * compiled with gcc on first use, deleted when the process exits. Where gcc (or Linux) is
 * missing, there is none, and the tests that need one leave it out.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const built = new Map<string, string | undefined>()

/** The library made from `source` as `<name>.so` (built once per process), or undefined where it cannot be built. */
export function preloadShim(name: string, source: string): string | undefined {
  if (built.has(name)) return built.get(name)
  built.set(name, undefined)
  if (process.platform !== 'linux') return undefined
  const dir = mkdtempSync(join(tmpdir(), `petstore-${name}-`))
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
  try {
    writeFileSync(join(dir, `${name}.c`), source)
    execFileSync('gcc', ['-shared', '-fPIC', '-O2', '-o', join(dir, `${name}.so`), join(dir, `${name}.c`), '-ldl'], { stdio: 'ignore' })
    built.set(name, join(dir, `${name}.so`))
  } catch {
    // No gcc: no shim.
  }
  return built.get(name)
}
