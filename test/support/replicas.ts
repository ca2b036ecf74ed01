/**
 * Sandbox replicas (real processes of the CLI) on one Redis, and a mixed load of reads and creates
 * across many tenants through a load balancer, with the checks a partner would make afterwards:
 * every acknowledged create listed with its id, nothing listed that was never sent, ids unique,
 * and each tenant's journal holding exactly the requests it was answered.
 */
import { runCli, type CliRun } from './sandbox-cli.js'
import { freePort } from './redis-server.js'
import { generator } from '../../src/core/faults.js'

/** How long the replica load tests run: a few seconds by default, 20 in CI (`.ci/run` sets it). */
export const LOAD_SECONDS = Number(process.env['PETSTORE_TEST_REPLICA_SECONDS'] ?? 3)

export interface Replica {
  readonly port: number
  readonly run: CliRun
}

/** Starts `count` replicas of `petstore-sandbox serve --any-key --redis-url <url>`; each is killed when the test ends. */
export async function startReplicas(count: number, redisUrl: string, extra: readonly string[] = []): Promise<Replica[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const port = await freePort()
      // @note The loads check that every journal is complete: its byte budget (whose dropping is
      // tested on its own) is lifted so that CI's 20 s of load fit in it.
      const run = runCli(['serve', '--port', String(port), '--any-key', '--admin-token', 'root', '--scenario', 'empty', '--quiet', '--journal-bytes', '64MiB', ...extra], {
        PETSTORE_SANDBOX_REDIS_URL: redisUrl,
      })
      await run.waitFor('is running')
      return { port, run }
    }),
  )
}

export interface LoadOptions {
  readonly origin: string
  readonly keys: readonly string[]
  readonly seconds: number
  /** Clients sending at once. @default 12 */
  readonly concurrency?: number
  /** @default 1 */
  readonly seed?: number
  /** A tenant gets at most this many requests, so its whole journal fits the default limit of 1,000. @default 900 */
  readonly maxPerTenant?: number
}

export interface TenantRecord {
  /** Creates answered 201: name → id. */
  readonly acknowledged: Map<string, number>
  /** Every create sent, whatever became of it. */
  readonly attempted: Set<string>
  /** `x-load-id` of every request answered by a replica (not by the balancer itself). */
  readonly answered: Set<string>
  requests: number
}

export interface LoadReport {
  readonly tenants: Map<string, TenantRecord>
  /** How many answers had each status. */
  readonly statuses: Map<number, number>
  /** Requests that failed without an HTTP answer. */
  networkErrors: number
  requests: number
  readonly seconds: number
}

/** Runs the mixed load (half reads, half creates) for `seconds`. */
export async function runLoad(options: LoadOptions): Promise<LoadReport> {
  const random = generator(options.seed ?? 1)
  const maxPerTenant = options.maxPerTenant ?? 900
  const tenants = new Map<string, TenantRecord>(options.keys.map((key) => [key, { acknowledged: new Map(), attempted: new Set(), answered: new Set(), requests: 0 }]))
  const report: LoadReport = { tenants, statuses: new Map(), networkErrors: 0, requests: 0, seconds: options.seconds }
  const deadline = Date.now() + options.seconds * 1000
  let sequence = 0
  const worker = async (index: number) => {
    while (Date.now() < deadline) {
      const open = options.keys.filter((key) => tenants.get(key)!.requests < maxPerTenant)
      if (open.length === 0) return
      const key = open[Math.floor(random() * open.length)]!
      const record = tenants.get(key)!
      record.requests++
      report.requests++
      const loadId = `w${index}-${++sequence}`
      const create = random() < 0.5
      const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'x-load-id': loadId }
      let response: Response
      try {
        if (create) {
          record.attempted.add(loadId)
          response = await fetch(`${options.origin}/v1/categories`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify({ name: loadId }),
          })
        } else {
          response = await fetch(`${options.origin}/v1/categories`, { headers })
        }
      } catch {
        report.networkErrors++
        continue
      }
      const text = await response.text()
      report.statuses.set(response.status, (report.statuses.get(response.status) ?? 0) + 1)
      // A 502/504 is nginx's own answer (no replica answered it); anything else came from a replica.
      if (response.status !== 502 && response.status !== 504) record.answered.add(loadId)
      if (create && response.status === 201) record.acknowledged.set(loadId, (JSON.parse(text) as { id: number }).id)
    }
  }
  await Promise.all(Array.from({ length: options.concurrency ?? 12 }, (_, index) => worker(index)))
  return report
}

export interface Verdict {
  /** Acknowledged creates not listed (or listed under another id). */
  lost: number
  /** Listed categories never sent. */
  unexpected: number
  /** Tenants whose ids repeat or do not increase in list order. */
  badIds: number
  /** Requests answered by a replica that its tenant's journal lacks. */
  journalMissing: number
  /** Journal entries of requests never sent. */
  journalExtra: number
  /** Creates sent but not acknowledged that are listed anyway (in flight when a replica died). */
  inFlightApplied: number
}

interface Listed {
  id: number
  name: string
}

export interface VerifyOptions {
  /** Whether each tenant's journal is checked too. @default true */
  readonly journal?: boolean
  /** Told one line per difference found (which tenant, which request, what was seen), for a failure's message. @default none */
  readonly explain?: string[]
}

/** Reads every tenant back through `origin` and compares with what the load saw. */
export async function verifyLoad(origin: string, report: LoadReport, options: VerifyOptions = {}): Promise<Verdict> {
  const verdict: Verdict = { lost: 0, unexpected: 0, badIds: 0, journalMissing: 0, journalExtra: 0, inFlightApplied: 0 }
  const explain = (line: string) => options.explain?.push(line)
  for (const [key, record] of report.tenants) {
    const headers = { authorization: `Bearer ${key}` }
    const response = await fetch(`${origin}/v1/categories`, { headers: { ...headers, 'x-load-id': 'verify' } })
    if (response.status !== 200) throw new Error(`listing ${key} answered ${response.status}: ${await response.text()}`)
    const listed = (await response.json()) as Listed[]
    const byName = new Map(listed.map((category) => [category.name, category.id]))
    for (const [name, id] of record.acknowledged) {
      if (byName.get(name) === id) continue
      verdict.lost++
      explain(`${key}: lost ${name} (answered 201 with id ${id}), listed ${byName.has(name) ? `with id ${byName.get(name)}` : 'not at all'}`)
    }
    for (const { id, name } of listed) {
      if (!record.attempted.has(name)) {
        verdict.unexpected++
        explain(`${key}: listed ${name} (id ${id}), never sent`)
      } else if (!record.acknowledged.has(name)) {
        verdict.inFlightApplied++
        explain(`${key}: listed ${name} (id ${id}), sent but not answered 201`)
      }
    }
    const ids = listed.map((category) => category.id)
    if (new Set(ids).size !== ids.length || ids.some((id, i) => i > 0 && id <= ids[i - 1]!)) {
      verdict.badIds++
      explain(`${key}: ids not unique and increasing: ${ids.join(',')}`)
    }
    if (options.journal === false) continue
    const journal = await fetch(`${origin}/__sandbox/requests?path=/v1/categories`, { headers })
    const entries = (await journal.json()) as { request: { headers: Record<string, string> } }[]
    const journaled = new Set(entries.map((entry) => entry.request.headers['x-load-id']))
    for (const loadId of record.answered) {
      if (journaled.has(loadId)) continue
      verdict.journalMissing++
      explain(`${key}: request ${loadId} answered by a replica, not in the journal (${entries.length} entries)`)
    }
    for (const loadId of journaled) {
      if (loadId !== 'verify' && (loadId === undefined || (!record.attempted.has(loadId) && !record.answered.has(loadId)))) {
        verdict.journalExtra++
        explain(`${key}: journal entry ${loadId ?? 'without x-load-id'} of a request never sent or never answered by a replica`)
      }
    }
  }
  return verdict
}

/** How many answers had a 5xx status. */
export function serverErrors(report: LoadReport): number {
  return [...report.statuses].filter(([status]) => status >= 500).reduce((sum, [, count]) => sum + count, 0)
}
