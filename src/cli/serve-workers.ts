/**
 * `serve --workers N`: the CLI's primary process, which serves nothing itself. It forks N worker
 * processes (node:cluster) that each run `serve` with the same options on the same port, each
 * accepting connections from the shared listening socket itself (`cluster.SCHED_NONE`, see
 * {@link runWorkers}). Tenants live in Redis (`--redis-url`, which the CLI
 * requires here), so every worker answers every tenant identically, as replicas behind a balancer
 * do (docs/decisions/0005, 0007). The primary prints the first worker's banner once all are up,
 * forwards SIGINT/SIGTERM, and replaces a worker that dies.
 *
 * Workers ride out outages: a worker never exits because Redis is away (it answers 503 until
 * Redis is back, at start too: `redisUnreachableAtStart: 'serve'`), and the primary never gives up
 * on a worker that keeps dying nor stops the others for it: it restarts it after a delay that
 * doubles with each death within a minute, up to {@link MAX_RESTART_DELAY_MS}.
 */
import cluster, { type Worker } from 'node:cluster'
import { monotonicNow } from '../core/clock.js'
import type { RedisEpoch } from '../storage/redis-connection.js'

/** Deaths within this window make the next restart wait longer; a minute without one starts over. */
const CRASH_WINDOW_MS = 60_000
/** The wait before restarting the second worker to die within {@link CRASH_WINDOW_MS} (the first restarts at once); doubled for each one after. */
const FIRST_RESTART_DELAY_MS = 500
/** The longest wait before a restart. */
export const MAX_RESTART_DELAY_MS = 30_000

/** How long to wait before replacing a worker, when `deaths` died within {@link CRASH_WINDOW_MS} (this one included). */
export function restartDelay(deaths: number): number {
  if (deaths <= 1) return 0
  return Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** Math.min(deaths - 2, 16))
}

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
  if (process.connected) process.send?.(ready, undefined, {}, () => undefined)
}

/** What a worker tells the primary of the epoch of its Redis keys (see `RedisLinkOptions.onEpoch`). */
export interface WorkerEpoch {
  readonly kind: 'petstore-sandbox:epoch'
  readonly token: string
  readonly beat: number
  /** Why the worker took storage for lost, once it did. */
  readonly lost?: string | undefined
}

function isEpoch(message: unknown): message is WorkerEpoch {
  const epoch = message as Partial<WorkerEpoch> | null
  return (
    typeof epoch === 'object' &&
    epoch !== null &&
    epoch.kind === 'petstore-sandbox:epoch' &&
    typeof epoch.token === 'string' &&
    epoch.token !== '' &&
    Number.isSafeInteger(epoch.beat) &&
    epoch.beat! >= 0 &&
    (epoch.lost === undefined || (typeof epoch.lost === 'string' && epoch.lost !== ''))
  )
}

/** The variable a worker started in place of another finds the epoch in (JSON `{ token, beat, lost?, primary }`, `primary` its primary's pid). */
const EPOCH_VARIABLE = 'PETSTORE_WORKER_EPOCH'
/** The variable that tells a worker it starts once the sandbox serves (its primary's pid): see `redisReplacing`. */
const REPLACING_VARIABLE = 'PETSTORE_WORKER_REPLACING'

/**
 * In a worker: the epoch the primary handed it (what its workers last told, see {@link runWorkers}),
 * and a listener telling the primary each newer one.
 */
export function workerEpochOptions(): { redisEpoch?: RedisEpoch; onRedisEpoch: (epoch: RedisEpoch) => void; redisReplacing: boolean } {
  // Started once the sandbox served (see runWorkers): it serves what a running worker would be refused.
  const replacing = process.env[REPLACING_VARIABLE] === String(process.ppid)
  let handed: unknown
  try {
    const value = JSON.parse(process.env[EPOCH_VARIABLE] ?? 'null') as { primary?: unknown } | null
    // @note Only from this worker's own primary: under another cluster supervisor (PM2's cluster
    // mode), a variable in its environment was taken for what Redis held (review41 R6, attack41 F2).
    handed = value !== null && value.primary === process.ppid ? { kind: 'petstore-sandbox:epoch', ...value } : undefined
  } catch {
    handed = undefined
  }
  const tell = (epoch: RedisEpoch) => {
    const message: WorkerEpoch = { kind: 'petstore-sandbox:epoch', token: epoch.token, beat: epoch.beat, ...(epoch.lost === undefined ? {} : { lost: epoch.lost }) }
    // @note With a callback, a channel closed meanwhile (the primary gone, the worker stopping) is an
    // error handed to it, not one emitted on the process: uncaught, that ended the worker (review39 R7).
    if (process.connected) process.send?.(message, undefined, {}, () => undefined)
  }
  if (!isEpoch(handed)) return { onRedisEpoch: tell, redisReplacing: replacing }
  return { redisEpoch: { token: handed.token, beat: handed.beat, ...(handed.lost === undefined ? {} : { lost: handed.lost }) }, onRedisEpoch: tell, redisReplacing: replacing }
}

/** Whether this process is a worker of `serve --workers`. */
export const isWorker = (): boolean => cluster.isWorker

function describeExit(code: number | null, signal: string | null): string {
  return signal !== null ? `killed by ${signal}` : `exit code ${code}`
}

/**
 * Runs the primary: forks one worker and waits for it to listen (so that a port in use or an
 * unreachable Redis is reported once, by that worker, and the primary exits 1), then the others;
 * prints the first one's banner once the others listened (or failed: replaced as any worker that exits).
 */
export async function runWorkers(count: number, say: (text: string) => void, complain: (line: string) => void): Promise<void> {
  // @note No connection is lost with a worker: each worker accepts from the shared socket itself,
  // so a connection is either still in the kernel's queue (taken by a live worker) or a dead
  // worker's, which the kernel closes at once. Round-robin (node's default) has the primary accept
  // and hold each connection until a worker says it took it: one that dies first (kill -9, OOM)
  // left those connections open and unanswered forever (attack4 H8). docs/decisions/0007.
  cluster.schedulingPolicy = cluster.SCHED_NONE
  // @note Only the primary hands an epoch: one left in its own environment (a shell's, a unit
  // file's) went to its first workers, which refused a healthy Redis as storage lost (attack41 F2).
  delete process.env[EPOCH_VARIABLE]
  delete process.env[REPLACING_VARIABLE]
  let closing = false
  const crashes: number[] = []
  /** The workers that said they serve (see {@link WorkerReady}). */
  const served = new WeakSet<Worker>()
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (isReady(message)) served.add(worker)
  })

  // @note The epoch the workers last told (the token of the first one's, the highest beat): a
  // worker started in place of another starts from it. Started knowing nothing, one replacing a
  // worker that died during an outage took what Redis came back with (an older snapshot, or empty)
  // for a new Redis: it served it, health ok, and handed ids out again while its sibling refused;
  // so did one replacing a worker that died after they had both refused (attack39 F6).
  let epoch: RedisEpoch | undefined
  // Once a worker took storage for lost, that goes to every worker started later (attack49 F1: one replacing a worker that
  // had found keys evicted counted them from its own first read, and served the evicted state).
  cluster.on('message', (_worker: Worker, message: unknown) => {
    if (!isEpoch(message)) return
    const lost = epoch?.lost ?? message.lost
    if (epoch === undefined || (message.token === epoch.token && message.beat > epoch.beat)) epoch = { token: message.token, beat: message.beat, lost }
    else if (lost !== epoch.lost) epoch = { ...epoch, lost }
  })

  // @note Every worker forked once the first serves is told so: one replacing a worker of a sandbox that never took the
  // token (no epoch to hand) exited at start again and again where a running one serves refused (attack61 F6).
  const epochVariable = () => ({
    ...(epoch === undefined ? {} : { [EPOCH_VARIABLE]: JSON.stringify({ ...epoch, primary: process.pid }) }),
    ...(serving ? { [REPLACING_VARIABLE]: String(process.pid) } : {}),
  })
  const fork = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork(epochVariable())
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
  /** Whether the first worker listened: from then on the sandbox serves, and a worker that exits is replaced. */
  let serving = false

  /** Restarts waiting for their delay. */
  const pending = new Set<NodeJS.Timeout>()
  const replace = (previous: number) => {
    const worker = cluster.fork(epochVariable())
    const onMessage = (message: unknown) => {
      if (!isReady(message)) return
      worker.off('message', onMessage)
      complain(`petstore-sandbox: worker ${worker.process.pid} is serving (in place of worker ${previous})`)
    }
    worker.on('message', onMessage)
  }
  cluster.on('exit', (worker: Worker, code, signal) => {
    // The first worker exiting before it listened: the start failed (said below).
    if (!serving) return
    if (closing) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0)
      return
    }
    // @note Never gives up, and never stops the workers that serve: a worker that keeps dying
    // (its store away, a bug) is restarted less and less often, and the others go on serving.
    const now = monotonicNow()
    crashes.push(now)
    while (crashes[0]! < now - CRASH_WINDOW_MS) crashes.shift()
    // @note A worker that served, leaving none alive that serves: replaced at once, whatever the deaths before. Waited for
    // as another's death, every worker killed in turn (an OOM killer, a request that crashes them) left the port refusing
    // every connection for up to 30 s (attack66 F4: 20 s dark, 2,423 requests refused); so did one killed while the only
    // other was still starting, which was taken for one serving (attack69 F5: 13 s dark). A worker that dies before it
    // serves (its start failing) still waits, so that a start that always fails is not a fork storm.
    const alone = served.has(worker) && !Object.values(cluster.workers ?? {}).some((other) => other !== undefined && other !== worker && !other.isDead() && served.has(other))
    const delay = alone ? 0 : restartDelay(crashes.length)
    const pid = worker.process.pid ?? 0
    const when = delay === 0 ? 'starting another' : `starting another in ${delay / 1000} s (${crashes.length} exits within ${CRASH_WINDOW_MS / 1000} s)`
    complain(`petstore-sandbox: worker ${pid} exited (${describeExit(code, signal)}); ${when}`)
    const timer = setTimeout(() => {
      pending.delete(timer)
      if (!closing) replace(pid)
    }, delay)
    pending.add(timer)
  })

  let banner: string
  try {
    banner = await fork()
  } catch (error) {
    // The worker said why on stderr (one line).
    stopAll()
    process.exit(error instanceof WorkerStartError ? error.exitCode || 1 : 1)
  }
  // @note The first worker serves from here: another exiting (at its start too), or the first, is replaced as later.
  // Taken for a failed start until every worker listened, a failover meeting a starting worker stopped every worker and
  // the primary, 201s already answered (attack49 F3); and the first worker dying meanwhile was never replaced (F4).
  serving = true
  await Promise.all(Array.from({ length: count - 1 }, () => fork().catch(() => undefined)))
  say(banner)

  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return
    closing = true
    for (const timer of pending) clearTimeout(timer)
    pending.clear()
    say(`${signal}: stopping ${count} workers, each finishing its in-flight requests\n`)
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0)
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
