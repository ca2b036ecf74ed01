/**
 * The soak: a bounded load of mixed reads and creates across many tenants against a sandbox on
 * 127.0.0.1, then a check that every acknowledged create is in its tenant's list and nothing
 * else is. Shared by the CI test (10 s) and `bench/soak.ts` (60 s).
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { answerClientErrors } from '../src/server/client-errors.js'
import { createSandboxApp } from '../src/server/create-sandbox-app.js'
import { generator } from '../src/core/faults.js'

export interface SoakOptions {
  readonly seconds: number
  /** @default 50 */
  readonly tenants?: number
  /** Concurrent clients. @default 16 */
  readonly clients?: number
  /** Share of requests that are creates. @default 0.3 */
  readonly createShare?: number
  /** A hard cap on requests, whatever the time. @default 2,000,000 */
  readonly maxRequests?: number
  readonly seed?: number
  /** Run the sandbox durable, in this directory. @default none */
  readonly dataDir?: string
  /** Keep the tenants in this Redis instead. @default none */
  readonly redisUrl?: string
  /** Prefix of the soak's Redis keys, to keep runs on one Redis apart. @default the sandbox's */
  readonly redisPrefix?: string
  /** Heap each tenant's journal may hold. @default the sandbox's (1 MiB) */
  readonly journalBytes?: number
}

export interface SoakReport {
  readonly seconds: number
  readonly tenants: number
  readonly requests: number
  readonly reads: number
  readonly creates: number
  readonly status5xx: number
  readonly otherFailures: number
  /** Acknowledged creates missing from their tenant's final list. */
  readonly lostWrites: number
  /** Soak-made categories in a final list that were never acknowledged. */
  readonly unexpectedWrites: number
  readonly createsPerSecond: number
  readonly requestsPerSecond: number
  readonly rssStartMb: number
  readonly rssEndMb: number
  readonly heapStartMb: number
  readonly heapEndMb: number
  readonly liveTenants: number
  readonly largestJournal: number
}

const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10

/** The same sequence of choices for the same seed. */
const random = generator

export async function soak(options: SoakOptions): Promise<SoakReport> {
  const tenantCount = options.tenants ?? 50
  const keys = Array.from({ length: tenantCount }, (_, i) => `soak-key-${i}`)
  // @note Every store option reaches the sandbox and the checker after it: a store left out would soak memory under its name.
  const store = { dataDir: options.dataDir, redisUrl: options.redisUrl, redisPrefix: options.redisPrefix, journalBytes: options.journalBytes }
  const sandbox = await createSandboxApp({ apiKeys: keys, scenario: 'empty', demoDir: false, ...store })
  const server = createServer({ keepAlive: true }, sandbox.listener)
  answerClientErrors(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const acknowledged = keys.map(() => new Set<string>())
  const next = random(options.seed ?? 20_261_122)
  const createShare = options.createShare ?? 0.3
  const maxRequests = options.maxRequests ?? 2_000_000
  let requests = 0
  let reads = 0
  let creates = 0
  let status5xx = 0
  let otherFailures = 0
  let sequence = 0

  globalThis.gc?.()
  const rssStart = process.memoryUsage().rss
  const heapStart = process.memoryUsage().heapUsed
  const started = performance.now()
  const deadline = started + options.seconds * 1000

  const client = async () => {
    while (performance.now() < deadline && requests < maxRequests) {
      requests++
      const tenant = Math.floor(next() * tenantCount)
      const headers: Record<string, string> = { authorization: `Bearer ${keys[tenant]}` }
      try {
        if (next() < createShare) {
          const name = `soak-${sequence++}`
          headers['content-type'] = 'application/json'
          const response = await fetch(`${origin}/v1/categories`, { method: 'POST', headers, body: JSON.stringify({ name }) })
          await response.arrayBuffer()
          creates++
          if (response.status === 201) acknowledged[tenant]!.add(name)
          else if (response.status >= 500) status5xx++
          else otherFailures++
        } else {
          const response = await fetch(`${origin}/v1/categories`, { headers })
          await response.arrayBuffer()
          reads++
          if (response.status >= 500) status5xx++
          else if (response.status !== 200) otherFailures++
        }
      } catch {
        otherFailures++
      }
    }
  }
  await Promise.all(Array.from({ length: options.clients ?? 16 }, client))
  const elapsed = (performance.now() - started) / 1000

  globalThis.gc?.()
  const memory = process.memoryUsage()
  const largestJournal = Math.max(0, ...(await Promise.all([...sandbox.tenants.live()].map(async ([, tenant]) => tenant.journal.count()))))
  const liveTenants = sandbox.tenants.size
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))

  // Every acknowledged create must be listed: with a data directory or Redis, by a new server on it.
  let checker = sandbox
  if (options.dataDir !== undefined || options.redisUrl !== undefined) {
    await sandbox.close()
    checker = await createSandboxApp({ apiKeys: keys, scenario: 'empty', demoDir: false, ...store })
  }
  let lostWrites = 0
  let unexpectedWrites = 0
  for (const [tenant, key] of keys.entries()) {
    const listed = new Set((await (await checker.tenants.resolve(key))!.store.listCategories()).map((category) => category.name))
    for (const name of acknowledged[tenant]!) if (!listed.has(name)) lostWrites++
    for (const name of listed) if (name.startsWith('soak-') && !acknowledged[tenant]!.has(name)) unexpectedWrites++
  }
  await checker.close()

  return {
    seconds: Math.round(elapsed * 10) / 10,
    tenants: tenantCount,
    requests: reads + creates,
    reads,
    creates,
    status5xx,
    otherFailures,
    lostWrites,
    unexpectedWrites,
    createsPerSecond: Math.round(creates / elapsed),
    requestsPerSecond: Math.round((reads + creates) / elapsed),
    rssStartMb: mb(rssStart),
    rssEndMb: mb(memory.rss),
    heapStartMb: mb(heapStart),
    heapEndMb: mb(memory.heapUsed),
    liveTenants,
    largestJournal,
  }
}
