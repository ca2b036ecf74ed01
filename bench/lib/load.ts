/** One autocannon measurement of `/v1/categories`, shared by the bench sections that load a server. */
import autocannon from 'autocannon'
import { READ_KEY, WRITE_KEY } from '../servers/keys.js'

export const METHODS = ['GET', 'POST'] as const
export type Method = (typeof METHODS)[number]

export interface Sample {
  readonly requestsPerSecond: number
  readonly p99: number
}

/** One autocannon run; throws when any answer was not 2xx, so a broken server never reads as fast. */
export async function load(origin: string, method: Method, seconds: number, connections: number): Promise<Sample> {
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
