/** Starts `petstore-sandbox serve` from the source (tsx) in a process of its own, as the attack benches run it. */
import { spawn, type ChildProcessByStdio } from 'node:child_process'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface CliChild {
  /** The port its banner printed for the API. */
  readonly port: number
  readonly pid: number
  /** Whether the process is still running (false once it exited or crashed). */
  alive(): boolean
  /** Kills it (SIGKILL) and waits for it to exit. */
  kill(): Promise<void>
}

/**
 * Runs `node [nodeArgs] --import tsx src/cli.ts serve --port 0 [args]` and waits for the banner's
 * API address; rejects, with what it printed, when it exits first.
 * @example const server = await startCliChild(['--quiet', '--api-key', 'bench-key'], ['--max-old-space-size=256'])
 */
export async function startCliChild(args: readonly string[], nodeArgs: readonly string[] = []): Promise<CliChild> {
  const child: ChildProcessByStdio<null, Readable, null> = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/cli.ts', 'serve', '--port', '0', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let exited = false
  child.once('exit', () => (exited = true))
  let out = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}\n${out}`)))
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
      const match = /API\s+http:\/\/[^/\s]+:(\d+)\/v1/.exec(out)
      if (match) resolve(Number(match[1]))
    })
  })
  return {
    port,
    pid: child.pid!,
    alive: () => !exited,
    async kill() {
      const gone = new Promise((resolve) => (exited ? resolve(undefined) : child.once('exit', resolve)))
      child.kill('SIGKILL')
      await gone
    },
  }
}
