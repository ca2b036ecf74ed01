import { describe, expect, it } from 'vitest'
import { DEFAULT_JOURNAL_BYTES, JOURNAL_BODY_LIMIT, JOURNAL_DEPTH_LIMIT, RequestJournal } from '../src/core/journal.js'
import { createPetstore } from '../src/index.js'
import { call, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('the request journal', () => {
  it('records method, url, path, operation, status, bodies, time and duration, newest last', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Ferrets' } })
    await call('/categories')
    const [create, list] = petstore.requests.all()
    expect(create).toMatchObject({
      id: 1,
      operation: 'createCategory',
      method: 'POST',
      url: 'https://api.shop.test/v1/categories',
      path: '/v1/categories',
      request: { body: { name: 'Ferrets' } },
      response: { status: 201, body: { id: 6, name: 'Ferrets' } },
    })
    expect(Date.parse(create!.time)).not.toBeNaN()
    expect(create!.durationMs).toBeGreaterThanOrEqual(0)
    expect(list).toMatchObject({ id: 2, operation: 'listCategories', response: { status: 200 } })
    expect((list!.response.body as unknown[]).length).toBe(6)
  })

  it('stamps an entry with the time the request arrived, not when it was answered', async () => {
    const petstore = await harness.use()
    const before = Date.now()
    await call('/categories', { headers: { prefer: 'delay=150' } })
    const answered = Date.now()
    const [entry] = petstore.requests.all()
    // @note Bounds a loaded machine can only widen: the request arrived after \`before\` and at least
    // the delay before the answer was in hand; a stamp taken when answering is later than that.
    expect(Date.parse(entry!.time)).toBeGreaterThanOrEqual(before)
    expect(Date.parse(entry!.time)).toBeLessThanOrEqual(answered - 150)
    expect(entry!.durationMs).toBeGreaterThanOrEqual(145)
  })

  it('keeps the newest 1,000 entries by default', async () => {
    const petstore = await harness.use({ scenario: 'empty' })
    for (let i = 1; i <= 1005; i++) await call('/categories', { headers: { 'x-seq': String(i) } })
    const entries = petstore.requests.all()
    expect(entries).toHaveLength(1000)
    expect(entries[0]!.request.headers['x-seq']).toBe('6')
    expect(entries.at(-1)!.request.headers['x-seq']).toBe('1005')
  })

  it('never stores the Authorization value', async () => {
    const petstore = await harness.use()
    await call('/categories', { headers: { cookie: 'session=abc' } })
    await call('/categories', { auth: 'Bearer not-the-key' })
    // Other services' credentials a client sends along (trial finding: they were kept as sent).
    await call('/categories', { headers: { 'x-api-key': 'other-secret-1', 'x-auth-token': 'other-secret-2' } })
    const text = JSON.stringify(petstore.requests.all())
    expect(text).not.toContain('other-secret')
    expect(text).not.toContain('t0ken')
    expect(text).not.toContain('not-the-key')
    expect(text).not.toContain('session=abc')
    expect(petstore.requests.all()[0]!.request.headers['authorization']).toBe('[redacted]')
  })

  it('redacts the credential headers and query parameters of issue 20 F13, and those the redact options add, in msw too (issue 20 F13)', async () => {
    const names = ['apikey', 'x-goog-api-key', 'x-amz-security-token', 'ocp-apim-subscription-key', 'private-token', 'x-vault-token', 'x-forwarded-authorization', 'x-csrf-token']
    const petstore = await harness.use({ redactHeaders: ['x-partner-thing'], redactQueryParams: ['sid'] })
    const headers = Object.fromEntries([...names, 'x-partner-thing'].map((name, i) => [name, `SECRET-h${i}`]))
    await call('/categories?api_key=SECRET-q1&access_token=SECRET-q2&sid=SECRET-q3&page=2', { headers: { ...headers, accept: 'application/json' } })
    const [entry] = petstore.requests.all()
    expect(JSON.stringify(entry)).not.toContain('SECRET-')
    for (const name of [...names, 'x-partner-thing']) expect(entry!.request.headers[name], name).toBe('[redacted]')
    expect(entry!.request.headers['accept']).toBe('application/json')
    expect(entry!.url).toMatch(/\/categories\?api_key=\[redacted\]&access_token=\[redacted\]&sid=\[redacted\]&page=2$/)
  })

  it('refuses a redactHeaders entry that is not a header name', async () => {
    expect(() => createPetstore({ redactHeaders: ['x bad'] })).toThrow(/Invalid petstore option redactHeaders\[0\]: expected a header name/)
  })

  it('records rejected requests too: 401, 400 with the text sent, 404 and 405', async () => {
    const petstore = await harness.use()
    await call('/categories', { auth: null })
    await call('/categories', { method: 'POST', body: '{oops' })
    await call('/nowhere')
    await call('/categories', { method: 'DELETE' })
    expect(petstore.requests.all().map((entry) => [entry.operation, entry.response.status])).toEqual([
      ['listCategories', 401],
      ['createCategory', 400],
      [null, 404],
      [null, 405],
    ])
    expect(petstore.requests.all()[1]!.request.body).toBe('{oops')
  })

  it('filters by method, path, operation and status', async () => {
    const petstore = await harness.use()
    await call('/categories')
    await call('/categories', { body: { name: 'x' } })
    await call('/pets/1')
    await call('/pets/99')
    expect(petstore.requests.all({ method: 'post' })).toHaveLength(1)
    expect(petstore.requests.all({ path: '/v1/pets/*' })).toHaveLength(2)
    expect(petstore.requests.all({ path: '/v1/categories' })).toHaveLength(2)
    expect(petstore.requests.all({ operation: 'getPetById', status: 404 })).toHaveLength(1)
  })

  it('keeps the newest entries up to its limit', async () => {
    const petstore = await harness.use({ journalLimit: 3 })
    for (let i = 0; i < 10; i++) await call('/store/orders')
    const entries = petstore.requests.all()
    expect(entries.map((entry) => entry.id)).toEqual([8, 9, 10])
  })

  it('truncates long bodies and says so', async () => {
    const petstore = await harness.use()
    const notes = 'd'.repeat(JOURNAL_BODY_LIMIT)
    await call('/categories', { body: { name: 'x', notes } })
    const [entry] = petstore.requests.all()
    expect(entry!.request.truncated).toEqual({ size: JSON.stringify({ name: 'x', notes }).length })
    expect((entry!.request.body as string).length).toBe(JOURNAL_BODY_LIMIT)
  })

  it('truncates long answers and says so', async () => {
    const petstore = await harness.use({ scenario: 'large-catalog' })
    await call('/categories')
    const [entry] = petstore.requests.all()
    expect(entry!.response.truncated!.size).toBeGreaterThan(JOURNAL_BODY_LIMIT)
    expect((entry!.response.body as string).length).toBe(JOURNAL_BODY_LIMIT)
  })

  it('drops its oldest entries once what they hold weighs more than its budget, keeping memory bounded', async () => {
    const petstore = await harness.use({ scenario: 'large-catalog' })
    // Each list answer is kept truncated to JOURNAL_BODY_LIMIT characters: at least that many bytes.
    const lists = Math.ceil(DEFAULT_JOURNAL_BYTES / JOURNAL_BODY_LIMIT) + 10
    for (let i = 0; i < lists; i++) await call('/categories')
    const entries = petstore.requests.all()
    expect(entries.length).toBeLessThan(lists)
    expect(entries.length).toBeGreaterThanOrEqual(Math.floor(DEFAULT_JOURNAL_BYTES / (JOURNAL_BODY_LIMIT + 4096)) - 1)
    expect(entries.at(-1)!.id).toBe(lists)
  })

  it('counts what a parsed body holds, not its text: 64 KiB of [{},{},…] is kept as text', async () => {
    const petstore = await harness.use()
    const body = `[${Array.from({ length: 21_000 }, () => '{}').join(',')}]`
    for (let i = 0; i < 40; i++) expect((await call('/categories', { body })).status).toBe(400)
    const entries = petstore.requests.all()
    // Parsed, each body would hold about 1.4 MB: the budget would keep one entry, and a server 90 MB per tenant.
    expect(entries[0]!.request.body).toBe(body)
    expect(entries.length).toBeGreaterThanOrEqual(8)
    expect(entries.length).toBeLessThan(40)
  })

  it('counts headers and the URL against its budget', async () => {
    const petstore = await harness.use({ journalBytes: 64 * 1024 })
    const headers = { 'x-padding': 'p'.repeat(8000) }
    for (let i = 0; i < 20; i++) await call(`/categories?q=${'u'.repeat(4000)}`, { headers })
    const entries = petstore.requests.all()
    expect(entries.length).toBeGreaterThan(1)
    expect(entries.length).toBeLessThanOrEqual(6)
  })

  it('always keeps the newest entry, however heavy', () => {
    const journal = new RequestJournal(10, 100)
    const entry = {
      time: '',
      durationMs: 0,
      operation: null,
      method: 'GET',
      url: 'https://x.test/v1/categories',
      path: '/v1/categories',
      request: { headers: {}, body: undefined },
      response: { status: 200, body: [] },
    }
    journal.record(entry)
    journal.record(entry)
    expect(journal.all().map((kept) => kept.id)).toEqual([2])
    journal.record({ ...entry, url: `${entry.url}?${'q'.repeat(500)}` })
    expect(journal.all().map((kept) => kept.id)).toEqual([3])
  })

  it('keeps its size while it may not grow (the server over its memory budget), dropping its oldest', () => {
    const journal = new RequestJournal(100, 1024 * 1024)
    const entry = (n: number) => ({
      time: '',
      durationMs: 0,
      operation: null,
      method: 'GET',
      url: `https://x.test/v1/categories?n=${n}`,
      path: '/v1/categories',
      request: { headers: {}, body: undefined },
      response: { status: 200, body: [] },
    })
    for (let i = 0; i < 10; i++) journal.record(entry(i))
    const held = journal.bytes
    for (let i = 10; i < 20; i++) journal.record(entry(i), { grow: false })
    expect(journal.bytes).toBeLessThanOrEqual(held)
    expect(journal.all().at(-1)!.url).toContain('n=19')
    expect(journal.all().map((kept) => kept.url)).not.toContain('https://x.test/v1/categories?n=0')
    expect(journal.size).toBeLessThanOrEqual(10)
  })

  it('is emptied by clear() and by reset()', async () => {
    const petstore = await harness.use()
    await call('/categories')
    petstore.requests.clear()
    expect(petstore.requests.all()).toEqual([])
    await call('/categories')
    await petstore.reset()
    expect(petstore.requests.all()).toEqual([])
  })

  it('keeps a body nested 30,000 deep as text, so the journal still serializes', async () => {
    const petstore = await harness.use()
    const deep = `{"name":"Deep","x":${'['.repeat(30_000)}${']'.repeat(30_000)}}`
    expect((await call('/categories', { body: deep })).status).toBe(201)
    const [entry] = petstore.requests.all()
    expect(entry!.request.body).toBe(deep)
    expect(() => JSON.stringify(petstore.requests.all())).not.toThrow()
  })

  it('still parses a body nested exactly to the depth limit, brackets inside strings aside', async () => {
    const petstore = await harness.use()
    const nested = `{"name":"[[[{{{","x":${'['.repeat(JOURNAL_DEPTH_LIMIT - 1)}${']'.repeat(JOURNAL_DEPTH_LIMIT - 1)}}`
    await call('/categories', { body: nested })
    expect(petstore.requests.all()[0]!.request.body).toEqual(JSON.parse(nested))
  })
})
