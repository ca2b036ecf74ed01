import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { createPetstore, PetstoreError, type Category } from '../src/index.js'
import { setupPetstoreServer } from '../src/node.js'
import { call, petstoreHarness, readConformant } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('reset and scenarios', () => {
  it('reset() restores the seed, not an empty store, and restarts ids', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Ferrets' } })
    await petstore.reset()
    expect((await petstore.categories.list()).map((category) => category.name)).toEqual([
      'Dogs',
      'Cats',
      'Rabbits',
      'Birds',
      'Fish',
    ])
    expect((await call<Category>('/categories', { body: { name: 'Again' } })).body.id).toBe(6)
  })

  it('useScenario() reseeds from another scenario; reset({ keepScenario: true }) returns to its seed', async () => {
    const petstore = await harness.use()
    await petstore.useScenario('empty')
    expect(petstore.scenario.name).toBe('empty')
    expect((await call('/categories')).body).toEqual([])
    await call('/categories', { body: { name: 'x' } })
    await petstore.reset({ keepScenario: true })
    expect(petstore.scenario.name).toBe('empty')
    expect(await petstore.categories.list()).toEqual([])
  })

  it('reset() returns to the scenario the petstore was created with, so a switch does not leak into the next test', async () => {
    const petstore = await harness.use()
    await petstore.useScenario('empty')
    await call('/categories', { body: { name: 'x' } })
    await petstore.reset()
    expect(petstore.scenario.name).toBe('default')
    expect((await call<Category[]>('/categories')).body).toHaveLength(5)
    expect((await call<Category>('/categories', { body: { name: 'next' } })).body.id).toBe(6)
    expect(petstore.requests.all()).toHaveLength(2)
  })

  it('reset() rejects a keepScenario that is not true or false, and changes nothing', async () => {
    const petstore = await harness.use()
    await petstore.useScenario('empty')
    await expect(petstore.reset({ keepScenario: 'yes' as unknown as boolean })).rejects.toThrow(
      'Invalid reset option keepScenario: expected true or false, received "yes"',
    )
    expect(petstore.scenario.name).toBe('empty')
  })

  it('reset() returns to a scenario created from a file, and to its keys', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'petstore-reset-'))
    onTestFinished(() => rm(dir, { recursive: true, force: true }))
    const file = join(dir, 'shop.json')
    const shop = { name: 'shop', version: '1.0.0', description: 'A file', apiKeys: ['shop-key'], seed: { categories: [{ name: 'Owls' }], pets: [], orders: [] } }
    await writeFile(file, JSON.stringify(shop))
    const petstore = await harness.use({ scenario: file, apiKeys: undefined })
    await petstore.useScenario('empty')
    await petstore.reset()
    expect(petstore.scenario.name).toBe('shop')
    expect((await call('/categories', { auth: 'Bearer shop-key' })).body).toEqual([{ id: 1, name: 'Owls' }])
  })

  it('resolves a relative baseUrl (/v1) against the page, as a browser or jsdom has one', async () => {
    vi.stubGlobal('location', { origin: 'http://localhost:5173', href: 'http://localhost:5173/' })
    onTestFinished(() => void vi.unstubAllGlobals())
    await harness.use({ baseUrl: '/v1' })
    const answer = await call<Category[]>('/categories', { base: 'http://localhost:5173/v1' })
    expect(answer.status).toBe(200)
    expect(answer.body).toHaveLength(5)
  })

  it('serves 10,000 categories on large-catalog, ids 1 to 10000', async () => {
    const petstore = await harness.use({ scenario: 'large-catalog' })
    const list = await petstore.categories.list()
    expect(list).toHaveLength(10_000)
    expect(list[9_999]).toEqual({ id: 10_000, name: 'Category 10000', description: 'Generated category number 10000' })
    expect((await call<Category>('/categories', { body: { name: 'next' } })).body.id).toBe(10_001)
  })

  it('takes a scenario object, numbering categories without ids after the highest id', async () => {
    const petstore = await harness.use({
      scenario: {
        name: 'inline',
        version: '1.0.0',
        description: 'inline',
        seed: { categories: [{ name: 'a' }, { id: 10, name: 'b' }, { name: 'c' }] },
      },
    })
    expect(await petstore.categories.list()).toEqual([
      { id: 11, name: 'a' },
      { id: 10, name: 'b' },
      { id: 12, name: 'c' },
    ])
    expect((await call<Category>('/categories', { body: { name: 'd' } })).body.id).toBe(13)
  })

  it('answers 500 rather than hand out an id that is not a safe integer', async () => {
    const petstore = await harness.use({
      scenario: { name: 'full', version: '1.0.0', description: 'f', seed: { categories: [{ id: Number.MAX_SAFE_INTEGER, name: 'last' }] } },
    })
    const answer = await call<{ code: string; message: string }>('/categories', { body: { name: 'one too many' } })
    expect(answer.status).toBe(500)
    expect(answer.body.message).toContain('is not a safe integer')
    expect(await petstore.categories.list()).toHaveLength(1)
  })

  it("takes the scenario's keys when no apiKeys option is given", async () => {
    await harness.use({
      apiKeys: undefined,
      scenario: { name: 'keyed', version: '1.0.0', description: 'k', apiKeys: ['partner-1'] },
    })
    expect((await call('/categories', { auth: 'Bearer partner-1' })).status).toBe(200)
    expect((await call('/categories', { auth: 'Bearer t0ken' })).status).toBe(401)
  })
})

describe('a scenario file that fails to load', () => {
  it('rejects ready with the loader’s message, and answers requests 500 with it rather than an unexplained error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'petstore-broken-'))
    onTestFinished(() => rm(dir, { recursive: true, force: true }))
    const file = join(dir, 'broken.json')
    await writeFile(file, JSON.stringify({ name: 'broken', version: 'one', description: 'x' }))
    const errors = vi.spyOn(console, 'error').mockImplementation(() => undefined)
    onTestFinished(() => errors.mockRestore())
    const petstore = await harness.use({ scenario: file }).catch(() => undefined)
    expect(petstore).toBeUndefined()
    const again = createPetstore({ baseUrl: 'https://broken.test/v1', scenario: file })
    await expect(again.ready).rejects.toBeInstanceOf(PetstoreError)
    harness.server.resetHandlers(...again.handlers)
    const answer = await fetch('https://broken.test/v1/categories', { headers: { authorization: 'Bearer k' } })
    const body = (await answer.json()) as { status: number; message: string }
    expect(body.status).toBe(500)
    expect(body.message).toContain('the petstore has no scenario to answer from')
    expect(body.message).toContain('version')
  })
})

describe('requests.all(filter)', () => {
  it.each([
    { name: 'a path without the base path', filter: { path: 'categories' }, message: /full URL path of an operation, base path included/ },
    { name: 'a status given as text', filter: { status: '201' }, message: /HTTP status as a number/ },
    { name: 'an unknown key', filter: { verb: 'POST' }, message: /verb/ },
    { name: 'an unknown operation', filter: { operation: 'createCategories' }, message: /listCategories, createCategory/ },
  ])('throws for a filter that cannot match: $name', async ({ filter, message }) => {
    const petstore = await harness.use()
    expect(() => petstore.requests.all(filter as never)).toThrow(message)
  })

  it.each([
    {
      name: 'a path without the base path',
      filter: { path: '/categories' },
      message:
        'Invalid requests filter path: expected the full URL path of an operation, base path included: /v1/categories, /v1/pets/{petId}, /v1/store/orders ({petId}: an id; a trailing * matches a prefix, as in /v1/pets/*), got "/categories"',
    },
    {
      name: 'a method no client sends',
      filter: { method: 'FETCH' },
      message: 'Invalid requests filter method: expected an HTTP method: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got "FETCH"',
    },
    {
      name: 'an unknown field',
      filter: { verb: 'POST' },
      message: 'Invalid requests filter verb: expected a filter field: method, path, operation, status',
    },
  ])('throws invalid_option naming what is allowed (issue 21 point 7): $name', async ({ filter, message }) => {
    const petstore = await harness.use()
    expect(() => petstore.requests.all(filter as never)).toThrow(new PetstoreError('invalid_option', message))
  })

  it.each([
    { name: 'a prefix outside the base', filter: { path: '/v2/*' } },
    { name: 'a path under an operation path', filter: { path: '/v1/categories/7' } },
    { name: 'a path parameter left as written', filter: { path: '/v1/pets/{petId}' } },
    { name: 'a query in the path', filter: { path: '/v1/categories?x=1' } },
    { name: 'a prefix deeper than any operation path', filter: { path: '/v1/pets/1/*' } },
    { name: 'a status no answer has', filter: { status: 42 } },
  ])('throws for a filter that cannot match: $name', async ({ filter }) => {
    const petstore = await harness.use()
    expect(() => petstore.requests.all(filter as never)).toThrow(PetstoreError)
  })

  it.each([
    { baseUrl: '*/v1', path: '/v1/pets/7' },
    { baseUrl: '*/v1', path: '/v1/cat*' },
    { baseUrl: '*/v1', path: '/*' },
    { baseUrl: '*', path: '/categories' },
    { baseUrl: ['https://api.shop.test/v1', 'https://staging.shop.test/api/v2'], path: '/api/v2/store/orders' },
    { baseUrl: ['https://api.shop.test/v1', 'https://staging.shop.test/api/v2'], path: '/v1/pets/*' },
  ])('accepts $path under $baseUrl', ({ baseUrl, path }) => {
    const petstore = createPetstore({ baseUrl })
    expect(petstore.requests.all({ path, method: 'delete', status: 0 })).toEqual([])
  })

  it('filters by the whole path and a numeric status', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Ferrets' } })
    await call('/categories')
    expect(petstore.requests.all({ path: '/v1/categories', status: 201 }).map((entry) => entry.method)).toEqual(['POST'])
  })
})

describe('isolation', () => {
  it('two petstores in one process never share data', async () => {
    const a = createPetstore({ baseUrl: 'https://a.test/v1', apiKeys: ['k'] })
    const b = createPetstore({ baseUrl: 'https://b.test/v1', apiKeys: ['k'] })
    const server = harness.server
    server.resetHandlers(...a.handlers, ...b.handlers)
    await Promise.all([a.ready, b.ready])
    await call('/categories', { base: 'https://a.test/v1', auth: 'Bearer k', body: { name: 'only in a' } })
    expect((await a.categories.list()).map((category) => category.name)).toContain('only in a')
    expect((await b.categories.list()).map((category) => category.name)).not.toContain('only in a')
    expect(b.requests.all()).toEqual([])
    server.resetHandlers()
  })
})

describe('the library API', () => {
  it('categories.create() stores like POST does and refuses with the codes POST answers', async () => {
    const petstore = await harness.use()
    expect(await petstore.categories.create({ name: 'Ferrets' })).toEqual({ id: 6, name: 'Ferrets' })
    await expect(petstore.categories.create({ name: ' ' })).rejects.toMatchObject({
      code: 'invalid_field',
      message: 'Cannot create category: name must be a non-empty string',
    })
    await expect(petstore.categories.create({} as never)).rejects.toMatchObject({ code: 'missing_field', message: 'Cannot create category: name is required' })
    await expect(petstore.categories.create(null as never)).rejects.toMatchObject({ code: 'invalid_body' })
    expect(await petstore.categories.list()).toHaveLength(6)
  })

  it('categories.create() refuses a name or description with an unpaired surrogate as POST does (issue 20 F08)', async () => {
    const petstore = await harness.use()
    await expect(petstore.categories.create({ name: 'a\ud800b' })).rejects.toMatchObject({
      code: 'invalid_field',
      message: 'Cannot create category: name must be well-formed Unicode text (it holds an unpaired UTF-16 surrogate)',
    })
    await expect(petstore.categories.create({ name: 'x', description: '\udfff' })).rejects.toMatchObject({ code: 'invalid_field' })
    expect(await petstore.categories.create({ name: 'Cats \u{1F408}' })).toEqual({ id: 6, name: 'Cats \u{1F408}' })
    expect(await petstore.categories.list()).toHaveLength(6)
  })

  it('categories.create() past maxCategories throws category_limit, pointing at petstore.reset()', async () => {
    const petstore = await harness.use({ maxCategories: 5 })
    await expect(petstore.categories.create({ name: 'Ferrets' })).rejects.toMatchObject({
      code: 'category_limit',
      message: 'Cannot create category: The tenant holds the most categories allowed (5); reset it to start again (petstore.reset())',
    })
  })

  it('categories.create() ignores unknown fields and an id as POST does, and refuses them with strict', async () => {
    const lenient = await harness.use()
    const input = { name: 'Ferrets', id: 500, colour: 'brown' } as unknown as { name: string }
    expect(await lenient.categories.create(input)).toEqual({ id: 6, name: 'Ferrets' })
    const strict = await harness.use({ strict: true })
    await expect(strict.categories.create(input)).rejects.toMatchObject({
      code: 'unknown_field',
      message: expect.stringMatching(/^Cannot create category: "(id|colour)" is not a field of NewCategory/) as unknown,
    })
    expect(await strict.categories.list()).toHaveLength(5)
  })

  it('reads pets and orders', async () => {
    const petstore = await harness.use()
    expect((await petstore.pets.get(2))?.['name']).toBe('Mittens')
    expect(await petstore.pets.get(42)).toBeUndefined()
    expect(await petstore.pets.list()).toHaveLength(4)
    expect(await petstore.orders.list()).toHaveLength(2)
  })

  it.each([
    { option: { scenario: 'nope' }, code: 'unknown_scenario', message: 'Cannot use scenario "nope": no such scenario. Known: after-sunset, default, empty, flaky, large-catalog' },
    { option: { baseUrl: 'api.shop.test' }, code: 'invalid_option', message: /baseUrl: expected an absolute URL .*, received "api\.shop\.test"/ },
    { option: { baseUrl: '/v1' }, code: 'invalid_option', message: /baseUrl: expected an absolute URL .*: a path is resolved against the page, and there is none here \(only in a browser\), received "\/v1"/ },
    { option: { apiKeys: [] }, code: 'invalid_option', message: /apiKeys/ },
    { option: { apiKeys: ['has space'] }, code: 'invalid_option', message: /apiKeys/ },
    { option: { latency: -1 }, code: 'invalid_option', message: /latency/ },
    { option: { faults: { rate: 2 } }, code: 'invalid_option', message: /faults\.rate/ },
    { option: { maxBodyBytes: 0 }, code: 'invalid_option', message: /maxBodyBytes/ },
    { option: { strcit: true }, code: 'invalid_option', message: /strcit/ },
    { option: { apiKeys: 'all' }, code: 'invalid_option', message: /apiKeys: expected 'any' or a non-empty array of keys .*, received "all"/ },
    { option: { journalLimit: 1.5 }, code: 'invalid_option', message: /journalLimit: expected a whole number of entries, 0 or more, received 1\.5/ },
    { option: { scenario: 42 }, code: 'invalid_option', message: /scenario: expected a built-in scenario name, .* or a scenario object, received 42/ },
    { option: { latency: 'slow' }, code: 'invalid_option', message: /latency: expected whole milliseconds from 0 to 60000 \(50\) or a range .*, received "slow"/ },
    { option: { scenario: { name: 'x' } }, code: 'invalid_scenario', message: /version/ },
  ])('throws PetstoreError $code for a bad option: $message', ({ option, code, message }) => {
    let thrown: unknown
    try {
      createPetstore(option as never)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(PetstoreError)
    expect((thrown as PetstoreError).code).toBe(code)
    expect((thrown as PetstoreError).message).toMatch(message)
  })

  it('useScenario() throws on an unknown name and keeps the current scenario and data', async () => {
    const petstore = await harness.use()
    await petstore.categories.create({ name: 'Ferrets' })
    await expect(petstore.useScenario('nope')).rejects.toThrow(/no such scenario/)
    await expect(petstore.useScenario('./missing/scenario.json')).rejects.toMatchObject({ code: 'scenario_not_readable' })
    expect(petstore.scenario.name).toBe('default')
    expect(await petstore.categories.list()).toHaveLength(6)
    expect((await call('/categories')).status).toBe(200)
  })
})

describe('setupPetstoreServer', () => {
  it('returns an msw server wired to a fresh petstore', async () => {
    harness.server.close()
    const { server, petstore } = setupPetstoreServer({ baseUrl: 'https://node.test/v1', apiKeys: ['k'] })
    server.listen({ onUnhandledRequest: 'error' })
    try {
      const response = await fetch('https://node.test/v1/categories', { headers: { authorization: 'Bearer k' } })
      const answer = await readConformant('GET', '/categories', response)
      expect(answer.status).toBe(200)
      expect(answer.body).toEqual(await petstore.categories.list())
    } finally {
      server.close()
      harness.server.listen({ onUnhandledRequest: 'error' })
    }
  })
})
