/**
 * In-process overhead: microseconds per `fetch` answered through msw's `setupServer` by the
 * petstore's handlers (`GET /categories`, default scenario: auth, store, journal) against a
 * static msw handler returning the same JSON, in the same process, in alternating batches.
 */
import { http, HttpResponse, type RequestHandler } from 'msw'
import { setupServer } from 'msw/node'
import { createPetstore } from '../src/library/petstore.js'
import { median, type Figure } from './lib/figures.js'

export interface InProcessOptions {
  /** Rounds; each runs one batch of each. @default 10 */
  readonly rounds?: number
  /** Fetches per batch. @default 2000 */
  readonly batch?: number
}

const KEY = 'bench-key'
const OURS = 'https://api.shop.test/v1/categories'
const STATIC = 'https://static.shop.test/v1/categories'

export async function measureInProcess(options: InProcessOptions = {}): Promise<Figure[]> {
  const rounds = options.rounds ?? 10
  const size = options.batch ?? 2000
  const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: [KEY] })
  await petstore.ready
  const list = await petstore.categories.list()
  const staticHandler = http.get(STATIC, () => HttpResponse.json(list))
  const server = setupServer()
  server.listen({ onUnhandledRequest: 'error' })

  /** Microseconds per fetch, each answer read in full and checked. */
  async function batch(handlers: RequestHandler[], url: string, count: number): Promise<number> {
    server.resetHandlers(...handlers)
    const started = performance.now()
    for (let i = 0; i < count; i++) {
      const response = await fetch(url, { headers: { authorization: `Bearer ${KEY}` } })
      const body = (await response.json()) as unknown[]
      if (response.status !== 200 || body.length !== list.length) throw new Error(`${url} answered ${response.status}`)
    }
    return ((performance.now() - started) / count) * 1000
  }

  const ours: number[] = []
  const statics: number[] = []
  try {
    await batch(petstore.handlers, OURS, size)
    await batch([staticHandler], STATIC, size)
    for (let round = 0; round < rounds; round++) {
      // Alternate which goes first, so neither always runs on a warmer or colder heap.
      if (round % 2 === 0) {
        ours.push(await batch(petstore.handlers, OURS, size))
        statics.push(await batch([staticHandler], STATIC, size))
      } else {
        statics.push(await batch([staticHandler], STATIC, size))
        ours.push(await batch(petstore.handlers, OURS, size))
      }
    }
  } finally {
    server.close()
  }
  const command = 'npm run bench -- in-process'
  return [
    {
      section: 'in-process',
      name: 'GET /categories through setupServer, petstore vs a static msw handler',
      value: median(ours.map((value, round) => value / statics[round]!)),
      unit: 'x',
      // Issue 14, target 6: at or below a static msw handler.
      target: { kind: 'max', value: 1 },
      detail: `median of ${rounds} rounds of ${size} fetches: petstore ${median(ours).toFixed(1)} µs, static handler ${median(statics).toFixed(1)} µs per fetch`,
      command,
    },
  ]
}
