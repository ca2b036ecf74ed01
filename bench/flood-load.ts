/**
 * Floods a sandbox the way the hostile findings of issue 10 did, each bounded in size: journals
 * filled with bodies that parse to 20 times their text, scenario switches to `large-catalog` by
 * many keys, and a crowd of `Prefer: delay` requests holding sockets. Throughout, a partner's
 * data and the health check are watched. Shared by `test/server/floods.test.ts` (small sizes,
 * small budgets) and `bench/floods.ts` (the issue's sizes, default limits, peak RSS).
 */

export interface FloodReport {
  readonly name: string
  /** Requests sent by the flood. */
  readonly sent: number
  /** How many answers came with each status; 0 counts connections dropped without an answer. */
  readonly statuses: Readonly<Record<string, number>>
  /** Health checks made during the flood, and how many did not answer 200. */
  readonly healthChecks: number
  readonly healthFailures: number
  /** Why each of the first failed health checks failed: `status 503 …` or the error, with its time into the flood. */
  readonly healthFailureReasons: readonly string[]
  /** Whether the partner's categories after the flood were those before it. */
  readonly partnerIntact: boolean
  readonly seconds: number
}

export interface FloodTarget {
  /** `http://127.0.0.1:<port>` of a sandbox started with `--any-key` (or `anyKey: true`). */
  readonly origin: string
}

const PARTNER = 'flood-partner'
const json = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })

/** 64 KiB of `[{},{},…]`: a body that parses to about 1.4 MB. */
export const BLOATED_BODY = `[${Array.from({ length: 21_800 }, () => '{}').join(',')}]`

async function partnerList(origin: string): Promise<string> {
  const response = await fetch(`${origin}/v1/categories`, { headers: json(PARTNER) })
  if (response.status !== 200) throw new Error(`the partner's list answered ${response.status}`)
  return response.text()
}

/** Creates the partner's own category, and returns its list as text. */
async function preparePartner(origin: string): Promise<string> {
  const response = await fetch(`${origin}/v1/categories`, { method: 'POST', headers: json(PARTNER), body: '{"name":"Partner data"}' })
  if (response.status !== 201) throw new Error(`the partner's create answered ${response.status}`)
  await response.arrayBuffer()
  return partnerList(origin)
}

/** Runs `flood` with `concurrency` workers while checking health every 100 ms. */
async function underWatch(
  name: string,
  origin: string,
  total: number,
  concurrency: number,
  send: (index: number) => Promise<number>,
): Promise<FloodReport> {
  const before = await preparePartner(origin)
  const started = performance.now()
  const statuses: Record<string, number> = {}
  let healthChecks = 0
  let healthFailures = 0
  const healthFailureReasons: string[] = []
  const failed = (reason: string) => {
    healthFailures++
    if (healthFailureReasons.length < 5) healthFailureReasons.push(`${reason} at ${Math.round(performance.now() - started)} ms`)
  }
  let flooding = true
  const watcher = (async () => {
    while (flooding) {
      healthChecks++
      try {
        const response = await fetch(`${origin}/__sandbox/health`, { signal: AbortSignal.timeout(5000) })
        const body = await response.text()
        if (response.status !== 200) failed(`status ${response.status} ${body.slice(0, 200)}`)
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause
        failed(`${String(error)}${cause === undefined ? '' : ` (cause: ${cause.code ?? ''} ${cause.message ?? ''})`}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  })()
  let next = 0
  const worker = async () => {
    while (next < total) {
      const index = next++
      // A connection dropped without an answer counts as status 0.
      const status = await send(index).catch(() => 0)
      statuses[status] = (statuses[status] ?? 0) + 1
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  flooding = false
  await watcher
  const after = await partnerList(origin)
  return {
    name,
    sent: total,
    statuses,
    healthChecks,
    healthFailures,
    healthFailureReasons,
    partnerIntact: after === before,
    seconds: Math.round((performance.now() - started) / 100) / 10,
  }
}

/** `posts` creates with a bloated body, spread over `keys` keys (each a new tenant). */
export function journalFlood({ origin }: FloodTarget, posts: number, keys: number): Promise<FloodReport> {
  return underWatch('journal', origin, posts, 8, async (index) => {
    const response = await fetch(`${origin}/v1/categories`, { method: 'POST', headers: json(`journal-${index % keys}`), body: BLOATED_BODY })
    await response.arrayBuffer()
    return response.status
  })
}

/** `keys` keys each switching their tenant to `large-catalog` (10,000 categories). */
export function scenarioFlood({ origin }: FloodTarget, keys: number): Promise<FloodReport> {
  return underWatch('scenario', origin, keys, 4, async (index) => {
    // @note The key calls the API first: its tenant exists from then on.
    const first = await fetch(`${origin}/v1/categories`, { headers: json(`switch-${index}`) })
    await first.arrayBuffer()
    if (first.status !== 200) return first.status
    const response = await fetch(`${origin}/__sandbox/scenario`, {
      method: 'PUT',
      headers: json(`switch-${index}`),
      body: '{"name":"large-catalog"}',
    })
    await response.arrayBuffer()
    return response.status
  })
}

/** `requests` requests at once, each asking to be answered after `delayMs`. */
export function delayFlood({ origin }: FloodTarget, requests: number, delayMs: number): Promise<FloodReport> {
  return underWatch('delay', origin, requests, requests, async (index) => {
    const response = await fetch(`${origin}/v1/categories`, {
      headers: { ...json(`delay-${index % 50}`), prefer: `delay=${delayMs}` },
      signal: AbortSignal.timeout(delayMs + 30_000),
    })
    await response.arrayBuffer()
    return response.status
  })
}
