/**
 * Server throughput: requests per second of `GET` and `POST /v1/categories` with autocannon
 * (10 connections), for the sandbox as `npm start` runs it (the built CLI, request log on), for
 * its listener alone (no log), and for a bare `node:http` server answering the same list behind
 * the same bearer check, side by side in rounds, plus the other ways of bridging HTTP to the
 * core, for comparison. The load generator runs in this process; every server runs in its own.
 */
import { startChildServer, type ChildServer } from './lib/child-server.js'
import { median, type Figure } from './lib/figures.js'
import { load, METHODS, type Method, type Sample } from './lib/load.js'

export interface ThroughputOptions {
  /** Rounds; each measures every server once per method. @default 5 */
  readonly rounds?: number
  /** Seconds of load per measurement. @default 3 */
  readonly seconds?: number
  /** Seconds of load per server and method before the rounds. @default 3 */
  readonly warmUp?: number
  readonly connections?: number
}

const COMMAND = 'npm run bench -- server'

interface Contender {
  readonly name: string
  readonly file: string
  readonly args: readonly string[]
  /** @default both */
  readonly methods?: readonly Method[]
  /** It serves the admin API: its writing tenant is reset to the seed before every POST measurement. */
  readonly resets?: boolean
}

const BARE: Contender = { name: 'bare node:http', file: 'bare-server.ts', args: [] }
const SANDBOX: Contender = { name: 'sandbox', file: 'sandbox-variants.ts', args: ['listener'], resets: true }
/** Issue 14's target 1: the CLI as `npm start` runs it, its request log written to a file. */
const NPM_START: Contender = { name: '`npm start` (request log on)', file: 'cli-server.ts', args: [], resets: true }
const OTHERS: readonly Contender[] = [
  { name: 'sandbox.app (express)', file: 'sandbox-variants.ts', args: ['express-app'], resets: true },
  { name: "msw's getResponse bridge", file: 'sandbox-variants.ts', args: ['get-response'] },
  { name: 'express + @mswjs/http-middleware', file: 'sandbox-variants.ts', args: ['http-middleware'] },
  // Every create committed to SQLite and its WAL fsynced before its 201 (shared across concurrent requests).
  { name: 'sandbox with --data-dir', file: 'sandbox-variants.ts', args: ['durable'], methods: ['POST'], resets: true },
  // Committed to SQLite before its 201, without waiting for the fsync (`--durability process-crash`).
  { name: 'sandbox with --data-dir --durability process-crash', file: 'sandbox-variants.ts', args: ['durable-process-crash'], methods: ['POST'], resets: true },
]
const measures = (contender: Contender, method: Method) => (contender.methods ?? METHODS).includes(method)


export async function measureThroughput(options: ThroughputOptions = {}): Promise<Figure[]> {
  const rounds = options.rounds ?? 5
  const seconds = options.seconds ?? 3
  const connections = options.connections ?? 10
  const warmUp = options.warmUp ?? 3
  const contenders = [BARE, NPM_START, SANDBOX, ...OTHERS]
  const servers = new Map<Contender, ChildServer>()
  const samples = new Map<string, Sample[]>()
  const key = (contender: Contender, method: Method) => `${contender.name} ${method}`
  try {
    for (const contender of contenders) servers.set(contender, await startChildServer(contender.file, contender.args))
    // @note Every POST measurement starts on the seed: a faster machine than ours (~30,000 creates
    // a second) would reach the 800,000 categories a tenant may hold within the run, and the bench
    // would stop on the refusals (409). The msw bridges (no admin API) create too few to need it.
    const measure = (contender: Contender, method: Method, duration: number) =>
      load(servers.get(contender)!.origin, method, duration, connections, { fromSeed: contender.resets })
    // Warm up every server's code paths before anything counts (on a loaded machine, 1 s left
    // the first rounds still warming up).
    for (const contender of servers.keys()) {
      for (const method of METHODS) if (measures(contender, method)) await measure(contender, method, warmUp)
    }
    for (let round = 1; round <= rounds; round++) {
      for (const method of METHODS) {
        for (const contender of contenders.filter((candidate) => measures(candidate, method))) {
          const sample = await measure(contender, method, seconds)
          samples.set(key(contender, method), [...(samples.get(key(contender, method)) ?? []), sample])
        }
      }
      process.stderr.write(`server throughput: round ${round} of ${rounds} done\n`)
    }
  } finally {
    await Promise.all([...servers.values()].map((server) => server.stop()))
  }

  const figures: Figure[] = []
  // Issue 14: at least half a bare server, p99 at most 5 ms, with the request log on as `npm start` has it.
  const TARGET_RATIO = 0.5
  const TARGET_P99_MS = 5
  for (const method of METHODS) {
    const bare = samples.get(key(BARE, method))!
    const ratioOf = (contender: Contender) =>
      median(samples.get(key(contender, method))!.map((sample, round) => sample.requestsPerSecond / bare[round]!.requestsPerSecond))
    const rps = (contender: Contender) => median(samples.get(key(contender, method))!.map((sample) => sample.requestsPerSecond))
    const spread = (contender: Contender) => {
      const values = samples.get(key(contender, method))!.map((sample) => Math.round(sample.requestsPerSecond))
      return `${Math.min(...values)}-${Math.max(...values)}`
    }
    for (const [contender, label] of [[NPM_START, '`npm start` (request log on)'], [SANDBOX, 'sandbox listener (no log)']] as const) {
      figures.push({
        section: 'server',
        name: `${method} /v1/categories, ${label} vs bare node:http`,
        value: ratioOf(contender),
        unit: 'x',
        target: { kind: 'min', value: TARGET_RATIO },
        detail: `median of ${rounds} per-round ratios, ${seconds} s each, ${connections} connections: ${label} ${Math.round(rps(contender))} req/s (${spread(contender)}), bare ${Math.round(rps(BARE))} req/s (${spread(BARE)})`,
        command: COMMAND,
      })
      figures.push({
        section: 'server',
        name: `${method} /v1/categories, ${label} p99 latency`,
        value: median(samples.get(key(contender, method))!.map((sample) => sample.p99)),
        unit: 'ms',
        target: { kind: 'max', value: TARGET_P99_MS },
        detail: `median of the rounds' p99, ${connections} connections`,
        command: COMMAND,
      })
    }
    for (const other of OTHERS.filter((candidate) => measures(candidate, method))) {
      figures.push({
        section: 'server',
        name: `${method} /v1/categories, ${other.name} vs bare node:http`,
        value: ratioOf(other),
        unit: 'x',
        detail: `for comparison: ${Math.round(rps(other))} req/s (${spread(other)}), p99 ${median(samples.get(key(other, method))!.map((sample) => sample.p99))} ms`,
        command: COMMAND,
      })
    }
  }
  return figures
}
