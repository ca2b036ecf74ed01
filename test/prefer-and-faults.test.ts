import { describe, expect, it, onTestFinished, vi } from 'vitest'
import type { ApiError, Category } from '../src/index.js'
import { BASE, call, KEY, petstoreHarness, readConformant } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('Prefer: code', () => {
  it.each([
    { code: 500, error: 'internal_error' },
    { code: 503, error: 'service_unavailable' },
    { code: 400, error: 'invalid_body' },
    { code: 401, error: 'invalid_api_key' },
    { code: 413, error: 'payload_too_large' },
  ])('forces $code on createCategory with the Error body $error and changes nothing', async ({ code, error }) => {
    const petstore = await harness.use()
    const answer = await call<ApiError>('/categories', { body: { name: 'x' }, headers: { prefer: `code=${code}` } })
    expect(answer.status).toBe(code)
    expect(answer.body.code).toBe(error)
    expect(answer.body.message).toContain(`Prefer: code=${code}`)
    expect(await petstore.categories.list()).toHaveLength(5)
  })

  it.each([
    { path: '/categories', code: 503, error: 'service_unavailable' },
    { path: '/categories', code: 401, error: 'invalid_api_key' },
    { path: '/pets/1', code: 404, error: 'not_found' },
    { path: '/pets/1', code: 410, error: 'gone' },
    { path: '/store/orders', code: 500, error: 'internal_error' },
  ])('forces $code on GET $path with the Error body $error', async ({ path, code, error }) => {
    await harness.use()
    const answer = await call<ApiError>(path, { headers: { prefer: `code=${code}` } })
    expect(answer.status).toBe(code)
    expect(answer.body.code).toBe(error)
  })

  it('names the operation as the interface writes it in a forced 410 (GET /pets/{petId})', async () => {
    await harness.use()
    const answer = await call<ApiError>('/pets/1', { headers: { prefer: 'code=410' } })
    expect(answer.body.message).toBe('GET /pets/{petId} was sunset on 2027-06-30T00:00:00Z (forced by "Prefer: code=410")')
  })

  it.each([
    { method: 'POST', path: '/categories', code: 404, allowed: '201, 400, 401, 409, 413, 500, 503' },
    { method: 'POST', path: '/categories', code: 405, allowed: '201, 400, 401, 409, 413, 500, 503' },
    { method: 'GET', path: '/categories', code: 400, allowed: '200, 401, 500, 503' },
    { method: 'GET', path: '/categories', code: 410, allowed: '200, 401, 500, 503' },
  ])('refuses code=$code on $method $path, which does not declare it', async ({ method, path, code, allowed }) => {
    const petstore = await harness.use()
    const answer = await call<ApiError>(path, { method, ...(method === 'POST' ? { body: { name: 'x' } } : {}), headers: { prefer: `code=${code}` } })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('invalid_prefer')
    expect(answer.body.message).toBe(`Invalid Prefer header: code=${code} is not an outcome of ${method} ${path}; use one of ${allowed}`)
    expect(await petstore.categories.list()).toHaveLength(5)
  })

  it('runs the operation normally when the preferred code is its success status', async () => {
    const petstore = await harness.use()
    expect((await call('/categories', { body: { name: 'x' }, headers: { prefer: 'code=201' } })).status).toBe(201)
    expect(await petstore.categories.list()).toHaveLength(6)
  })

  it('still answers 401 first', async () => {
    await harness.use()
    expect((await call('/categories', { auth: null, headers: { prefer: 'code=500' } })).status).toBe(401)
  })

  it.each(['code=418', 'code=abc', 'code=200x', 'delay=-5', 'delay=99999999', 'delay=soon'])(
    'answers 400 invalid_prefer for %s',
    async (prefer) => {
      await harness.use()
      const answer = await call<ApiError>('/categories', { headers: { prefer } })
      expect(answer.status).toBe(400)
      expect(answer.body.code).toBe('invalid_prefer')
    },
  )

  it('ignores other preferences such as return=minimal', async () => {
    await harness.use()
    expect((await call('/categories', { headers: { prefer: 'return=minimal, example=foo' } })).status).toBe(200)
  })
})

describe('Prefer: delay and latency', () => {
  it('waits at least the preferred delay before answering', async () => {
    const petstore = await harness.use()
    await call('/categories', { headers: { prefer: 'delay=120' } })
    expect(petstore.requests.all()[0]!.durationMs).toBeGreaterThanOrEqual(115)
  })

  it('draws each delay from a latency range { min, max }', async () => {
    const petstore = await harness.use({ latency: { min: 40, max: 90 } })
    // @note On a fake clock the journal's duration is the delay drawn, however loaded the machine:
    // a real clock adds the wait for a busy CPU, which no upper bound can tell from a long draw.
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] })
    onTestFinished(() => void vi.useRealTimers())
    for (let i = 0; i < 6; i++) {
      const answered = call('/categories')
      await vi.runAllTimersAsync()
      expect((await answered).status).toBe(200)
    }
    const durations = petstore.requests.all().map((entry) => entry.durationMs)
    expect(durations).toHaveLength(6)
    for (const duration of durations) {
      expect(duration).toBeGreaterThanOrEqual(40)
      expect(duration).toBeLessThanOrEqual(90)
    }
    expect(new Set(durations).size).toBeGreaterThan(1)
  })

  it('applies the latency option to every answer', async () => {
    const petstore = await harness.use({ latency: 60 })
    await call('/categories')
    await call('/store/orders')
    for (const entry of petstore.requests.all()) expect(entry.durationMs).toBeGreaterThanOrEqual(55)
  })
})

describe('faults', () => {
  async function outcomes(seed: number, count: number): Promise<(number | 'network')[]> {
    const petstore = await harness.use({ faults: { rate: 0.5, outcomes: ['500', '503', 'network'], seed } })
    const seen: (number | 'network')[] = []
    for (let i = 0; i < count; i++) {
      try {
        const response = await fetch(`${BASE}/categories`, { headers: { authorization: `Bearer ${KEY}` } })
        const answer = await readConformant('GET', '/categories', response)
        seen.push(answer.status)
        if (answer.status >= 500) expect(answer.body).toMatchObject({ message: expect.stringContaining('simulated') })
      } catch (error) {
        expect((error as Error).message).toBe('Failed to fetch')
        seen.push('network')
      }
    }
    expect(await petstore.categories.list()).toHaveLength(5)
    return seen
  }

  it('fails about the given share of requests with 500, 503 and network errors', async () => {
    const seen = await outcomes(7, 60)
    const failures = seen.filter((outcome) => outcome !== 200)
    expect(failures.length).toBeGreaterThan(15)
    expect(failures.length).toBeLessThan(45)
    expect(new Set(failures)).toEqual(new Set([500, 503, 'network']))
  })

  it('replays the same sequence from the same seed, and another from another seed', async () => {
    const first = await outcomes(11, 30)
    expect(await outcomes(11, 30)).toEqual(first)
    expect(await outcomes(12, 30)).not.toEqual(first)
  })

  it('never stores a create that failed', async () => {
    const petstore = await harness.use({ scenario: 'empty', faults: { rate: 0.5, outcomes: ['500'], seed: 3 } })
    const created: number[] = []
    for (let i = 0; i < 20; i++) {
      const answer = await call<Category>('/categories', { body: { name: `c${i}` } })
      if (answer.status === 201) created.push(answer.body.id)
    }
    expect((await petstore.categories.list()).map((category) => category.id)).toEqual(created)
  })

  it("runs the built-in flaky scenario's faults and latency, and replays them after reset()", async () => {
    const petstore = await harness.use({ scenario: 'flaky' })
    const run = async () => {
      const seen: (number | 'network')[] = []
      for (let i = 0; i < 15; i++) {
        seen.push(await fetch(`${BASE}/categories`, { headers: { authorization: `Bearer ${KEY}` } }).then((response) => response.status, () => 'network' as const))
      }
      return seen
    }
    const first = await run()
    expect(first.some((outcome) => outcome !== 200)).toBe(true)
    expect(first.filter((outcome) => outcome === 200).length).toBeGreaterThan(5)
    for (const entry of petstore.requests.all()) expect(entry.durationMs).toBeGreaterThanOrEqual(45)
    await petstore.reset()
    expect(await run()).toEqual(first)
  })

  it('switches the scenario faults off with faults: false', async () => {
    await harness.use({ scenario: 'flaky', faults: false, latency: 0 })
    for (let i = 0; i < 20; i++) expect((await call('/categories')).status).toBe(200)
  })
})
