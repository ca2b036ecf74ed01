/**
 * `serve --workers N`: the CLI's primary process, which serves nothing itself. It forks N worker
 * processes (node:cluster) that each run `serve` with the same options on the same port, the
 * primary handing them connections in turn. Tenants live in Redis (`--redis-url`, which the CLI
 * requires here), so every worker answers every tenant identically, as replicas behind a balancer
 * do (docs/decisions/0005, 0007). The primary prints the first worker's banner once all are up,
 * forwards SIGINT/SIGTERM, and replaces a worker that dies.
 */
import cluster, { type Worker } from 'node:cluster'

/** A worker that dies is replaced, unless this many died within {@link CRASH_WINDOW_MS}: then the primary gives up. */
const MAX_CRASHES = 5
const CRASH_WINDOW_MS = 60_000

/** What a worker sends the primary once it listens: its start banner. */
export interface WorkerReady {
  readonly kind: 'petstore-sandbox:ready'
  readonly banner: string
}

function isReady(message: unknown): message is WorkerReady {
  return typeof message === 'object' && message !== null && (message as { kind?: unknown }).kind === 'petstore-sandbox:ready'
}

/** In a worker: tells the primary it listens, with the banner the primary prints once. */
export function reportReady(banner: string): void {
  const ready: WorkerReady = { kind: 'petstore-sandbox:ready', banner }
  process.send?.(ready)
}

/** Whether this process is a worker of `serve --workers`. */
export const isWorker = (): boolean => cluster.isWorker

function describeExit(code: number | null, signal: string | null): string {
  return signal !== null ? `killed by ${signal}` : `exit code ${code}`
}

/**
 * Runs the primary: forks one worker and waits for it to listen (so that a port in use or an
 * unreachable Redis is reported once, by that worker, and the primary exits 1), then the others;
 * prints the first one's banner once all listen.
 */
export async function runWorkers(count: number, say: (text: string) => void, complain: (line: string) => void): Promise<void> {
  let closing = false
  let failed = false
  const crashes: number[] = []

  const fork = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork()
      const onMessage = (message: unknown) => {
        if (!isReady(message)) return
        worker.off('message', onMessage)
        worker.off('exit', onEarlyExit)
        resolve(message.banner)
      }
      const onEarlyExit = (code: number | null) => reject(new WorkerStartError(code ?? 1))
      worker.on('message', onMessage)
      worker.once('exit', onEarlyExit)
    })
  const stopAll = () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM')
  }

  try {
    const banner = await fork()
    await Promise.all(Array.from({ length: count - 1 }, fork))
    say(banner)
  } catch (error) {
    // The worker said why on stderr (one line); the others are stopped.
    stopAll()
    process.exit(error instanceof WorkerStartError ? error.exitCode || 1 : 1)
  }

  cluster.on('exit', (worker: Worker, code, signal) => {
    if (closing) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(failed ? 1 : 0)
      return
    }
    const now = Date.now()
    crashes.push(now)
    while (crashes[0]! < now - CRASH_WINDOW_MS) crashes.shift()
    if (crashes.length > MAX_CRASHES) {
      complain(`petstore-sandbox: ${crashes.length} workers exited within ${CRASH_WINDOW_MS / 1000} s; stopping`)
      closing = true
      failed = true
      stopAll()
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(1)
      return
    }
    complain(`petstore-sandbox: worker ${worker.process.pid} exited (${describeExit(code, signal)}); starting another`)
    cluster.fork()
  })

  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return
    closing = true
    say(`${signal}: stopping ${count} workers, each finishing its in-flight requests\n`)
    stopAll()
  }
  process.once('SIGINT', shutdown)
  process.once('SIGTERM', shutdown)
}

/** A worker exited before it listened, with this code. */
class WorkerStartError extends Error {
  constructor(readonly exitCode: number) {
    super(`a worker exited with code ${exitCode} before listening`)
  }
}
