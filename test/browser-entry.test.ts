/**
 * `petstore-sandbox/browser` loads the petstore as a chunk of its own (so a Vite build prints no
 * size advisory) behind a synchronous `setupPetstoreWorker()`. msw's `setupWorker()` refuses to
 * run in Node, so it is replaced here by a stand-in that keeps the handlers and a `start()`; the
 * handlers themselves are served by msw's `setupServer`, as the worker would serve them.
 */
import { setupServer } from 'msw/node'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { PetstoreError, setupPetstoreWorker, BUILTIN_SCENARIO_NAMES, PERSIST_STORAGE_KEY } from '../src/browser.js'
import { BUILTIN_SCENARIO_NAMES as LOADER_NAMES } from '../src/scenario/scenario-loader.js'
import '../src/vitest.js'

vi.mock('msw/browser', () => ({
  setupWorker: (...handlers: unknown[]) => ({ handlers, start: async () => 'registered' }),
}))

const BASE = 'https://shop.test/v1'
const server = setupServer()
beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(() => server.resetHandlers())
afterAll(() => server.close())

describe('setupPetstoreWorker()', () => {
  it('refuses persist that is not a boolean at once, saying what it received', () => {
    let error: unknown
    try {
      setupPetstoreWorker({ persist: 1 as never })
    } catch (thrown) {
      error = thrown
    }
    expect(error).toBeInstanceOf(PetstoreError)
    expect((error as PetstoreError).code).toBe('invalid_option')
    expect((error as PetstoreError).message).toBe('Invalid petstore option persist: expected true or false, received 1')
  })

  it('judges the petstore options as createPetstore() does: worker.start() and ready reject with the message', async () => {
    const { worker, petstore } = setupPetstoreWorker({ latency: -5 })
    const message =
      'Invalid petstore option latency: expected whole milliseconds from 0 to 60000 (50) or a range ({ min: 20, max: 200 }), received -5'
    await expect(worker.start()).rejects.toThrow(message)
    await expect(petstore.ready).rejects.toMatchObject({ code: 'invalid_option', message })
  })

  it('reports a bad option once, through worker.start(), with no unhandled rejection besides', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const { worker } = setupPetstoreWorker({ latency: -5 })
      await expect(worker.start()).rejects.toMatchObject({ code: 'invalid_option' })
      // Two turns of the event loop: time for Node to report a rejection nobody handled.
      await new Promise((resolve) => setTimeout(resolve, 20))
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled).toEqual([])
  })

  it('serves the API once started, and its synchronous parts work after worker.start()', async () => {
    const { worker, petstore } = setupPetstoreWorker({ baseUrl: BASE, apiKeys: ['k1'], scenario: 'empty' })
    expect(() => petstore.scenario).toThrow(PetstoreError)
    expect(() => petstore.requests.all()).toThrow(/await worker\.start\(\)/)
    expect(await worker.start()).toBe('registered')
    expect(petstore.scenario.name).toBe('empty')

    server.use(...petstore.handlers)
    const created = await fetch(`${BASE}/categories`, {
      method: 'POST',
      headers: { authorization: 'Bearer k1', 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Owls' }),
    })
    expect(created.status).toBe(201)
    expect(await created.json()).toEqual({ id: 1, name: 'Owls' })
    const listed = await fetch(`${BASE}/categories`, { headers: { authorization: 'Bearer k1' } })
    expect(await listed.json()).toEqual([{ id: 1, name: 'Owls' }])
    expect(petstore.requests.all().map((entry) => entry.response.status)).toEqual([201, 200])
    expect(await petstore.categories.list()).toEqual([{ id: 1, name: 'Owls' }])
  })

  it('waits for a request with requests.waitFor() called before worker.start(), and takes the journal matchers', async () => {
    const { worker, petstore } = setupPetstoreWorker({ baseUrl: BASE, apiKeys: ['k1'], scenario: 'empty' })
    const waiting = petstore.requests.waitFor({ operation: 'createCategory', body: { name: 'Owls' } })
    await worker.start()
    server.use(...petstore.handlers)
    await fetch(`${BASE}/categories`, { method: 'POST', headers: { authorization: 'Bearer k1', 'content-type': 'application/json' }, body: '{"name":"Owls"}' })
    expect((await waiting).response.status).toBe(201)
    expect(petstore).toHaveReceivedTimes(1, { method: 'POST', path: '/v1/categories', status: 201 })
    expect(() => expect(petstore).toHaveReceived({ path: '/categories' })).toThrow(/^Invalid requests filter path/)
  })

  it('answers requests sent before the petstore has loaded, and leaves other URLs to other handlers', async () => {
    const { petstore } = setupPetstoreWorker({ baseUrl: BASE, apiKeys: ['k1'] })
    server.use(...petstore.handlers)
    // Sent at once, while the petstore's chunk is still loading.
    const listed = await fetch(`${BASE}/categories`, { headers: { authorization: 'Bearer k1' } })
    expect(listed.status).toBe(200)
    expect(((await listed.json()) as unknown[]).length).toBe(5)
    await expect(fetch('https://shop.test/static/app.js')).rejects.toThrow()
  })

  it('waits for the petstore in its async methods called before it loaded', async () => {
    const { petstore } = setupPetstoreWorker({ apiKeys: ['k1'] })
    await petstore.useScenario('empty')
    expect(await petstore.categories.list()).toEqual([])
    await petstore.reset()
    expect(petstore.scenario.name).toBe('default')
  })

  it('seeds one test and sets a baseline through the petstore it stands for', async () => {
    const { petstore } = setupPetstoreWorker({ apiKeys: ['k1'] })
    await petstore.seed({ categories: [{ name: 'Ferrets' }] })
    expect(await petstore.categories.list()).toEqual([{ id: 1, name: 'Ferrets' }])
    const restore = await petstore.useBaseline('empty')
    await petstore.reset()
    expect(await petstore.categories.list()).toEqual([])
    await restore()
    expect(petstore.scenario.name).toBe('default')
  })

  it('names the embedded scenarios and the persist key without loading the petstore', () => {
    expect(BUILTIN_SCENARIO_NAMES).toEqual(LOADER_NAMES)
    expect(BUILTIN_SCENARIO_NAMES).toContain('default')
    expect(PERSIST_STORAGE_KEY).toBe('petstore-sandbox/state')
  })
})
