/** One autocannon measurement of `/v1/categories`, shared by the bench sections that load a server. */
import autocannon from 'autocannon'
import { READ_KEY, WRITE_KEY } from '../servers/keys.js'

export const METHODS = ['GET', 'POST'] as const
export type Method = (typeof METHODS)[number]

export interface Sample {
  readonly requestsPerSecond: number
  readonly p99: number
}

/**
 * One autocannon run; throws when any answer was not 2xx, so a broken server never reads as fast.
 * With `fromSeed`, a POST run starts on the writing tenant's seed ({@link resetWriteTenant}): only
 * for a sandbox, which serves the admin API.
 */
export async function load(
  origin: string,
  method: Method,
  seconds: number,
  connections: number,
  { fromSeed = false }: { readonly fromSeed?: boolean | undefined } = {},
): Promise<Sample> {
  if (fromSeed && method === 'POST') await resetWriteTenant(origin)
  const result = await autocannon({
    url: `${origin}/v1/categories`,
    method,
    connections,
    duration: seconds,
    headers:
      method === 'GET'
        ? { authorization: `Bearer ${READ_KEY}` }
        : { authorization: `Bearer ${WRITE_KEY}`, 'content-type': 'application/json' },
    ...(method === 'POST' ? { body: JSON.stringify({ name: 'Ferrets', description: 'Curious and quick' }) } : {}),
  })
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`${method} ${origin}: ${result.non2xx} non-2xx answers, ${result.errors} errors, ${result.timeouts} time-outs`)
  }
  return { requestsPerSecond: result.requests.average, p99: result.latency.p99 }
}

/**
 * Resets the writing key's tenant to its seed (the admin API, with the key itself), so that a POST
 * measurement starts on the seed and never meets the bench's category limit.
 * @note On a quiet machine a warm-up and a few POST rounds create more categories than the
 * benches allow a tenant (500,000 for peers and workers, 800,000 for the server bench; ~30,000
 * creates a second), and the rest were refused (409).
 */
async function resetWriteTenant(origin: string): Promise<void> {
  const response = await fetch(`${origin}/__sandbox/reset`, { method: 'POST', headers: { authorization: `Bearer ${WRITE_KEY}` } })
  if (response.status !== 200) throw new Error(`resetting the bench tenant answered ${response.status}: ${await response.text()}`)
}
