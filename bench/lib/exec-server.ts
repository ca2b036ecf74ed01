/**
 * Runs a server as its user would (a command line, not our bench harness), on a port chosen
 * here, and times it from exec to its first 200 on `GET /v1/categories` with a key. Used by the
 * start and peers sections, for the sandbox and for the peers alike.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { request } from 'node:http'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { READ_KEY } from '../servers/keys.js'

/** How to start one system. */
export interface Launch {
  readonly name: string
  /** The command and its arguments; `{port}` in any of them is replaced by the chosen port. */
  readonly command: readonly string[]
  readonly cwd?: string
  /** The path that answers the list of categories. @default '/v1/categories' */
  readonly path?: string
}

export interface RunningServer {
  readonly name: string
  readonly origin: string
  /** Milliseconds from spawn to the first 200 answer. */
  readonly startMs: number
  /**
   * CPU milliseconds (user and system, all threads) the spawned process had used by then, from
   * /proc (Linux; undefined elsewhere): steadier than wall time on a busy machine. Only the
   * process spawned: for `npm start`, npm's, not its children's.
   */
  readonly cpuMs: number | undefined
  stop(): Promise<void>
}

/** How often the start is polled, in ms: each poll is a new connection. */
const POLL_MS = 5

/** User and system CPU time of a process so far, in ms, or undefined where /proc is not. */
function cpuTimeMs(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces), from field 3: utime and stime are fields 14 and 15.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
  } catch {
    return undefined
  }
}
/** @note Linux's USER_HZ, 100 on every architecture Node runs on. */
const CLOCK_TICKS = 100

/** A free loopback port (bound and released: another process could take it meanwhile, rarely). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      probe.close(() => resolve(port))
    })
  })
}

function statusOf(port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, headers: { authorization: `Bearer ${READ_KEY}` } }, (res) => {
      res.resume()
      res.once('end', () => resolve(res.statusCode ?? 0))
    })
    req.once('error', () => resolve(0))
    req.setTimeout(2_000, () => req.destroy())
    req.end()
  })
}

/**
 * Spawns `launch` in a process group of its own (so `npm start` and a JVM's children stop with
 * it), polls until it answers 200, and returns it running. Its output goes to /dev/null, as to a
 * terminal nobody reads: every system keeps the request log it has by default.
 */
export async function launch(system: Launch, timeoutMs = 60_000): Promise<RunningServer> {
  const port = await freePort()
  const args = system.command.map((part) => part.replaceAll('{port}', String(port)))
  const started = performance.now()
  const child: ChildProcess = spawn(args[0]!, args.slice(1), { cwd: system.cwd, detached: true, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-2_000)))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    try {
      process.kill(-child.pid!, 'SIGTERM')
    } catch {
      return
    }
    const killer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        // already gone
      }
    }, 5_000)
    await exited
    clearTimeout(killer)
  }
  const path = system.path ?? '/v1/categories'
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${system.name} exited before answering: ${args.join(' ')}\n${stderr}`)
    if ((await statusOf(port, path)) === 200) break
    if (performance.now() - started > timeoutMs) {
      await stop()
      throw new Error(`${system.name} did not answer 200 on ${path} within ${timeoutMs} ms: ${args.join(' ')}\n${stderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
  const startMs = performance.now() - started
  return { name: system.name, origin: `http://127.0.0.1:${port}`, startMs, cpuMs: cpuTimeMs(child.pid!), stop }
}
