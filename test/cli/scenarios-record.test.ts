/**
 * `petstore-sandbox scenarios record`: a live service (a real sandbox on loopback, or a small
 * divergent node:http server) read into a scenario file that `scenarios validate` accepts and a
 * sandbox serves as the service did. The command runs in this process (`runCliHere`).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { loadScenario } from '../../src/index.js'
import { recordScenario } from '../../src/server.js'
import { runCliHere } from '../support/sandbox-cli.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'

const KEY = 'recorder-secret-key-4d1f'

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-record-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** A shop whose ids have gaps, so that numbering the records afresh would show. */
const SHOP = {
  name: 'upstream',
  version: '2.0.0',
  description: 'What the service holds',
  apiKeys: [KEY],
  seed: {
    categories: [
      { id: 7, name: 'Dogs', description: 'Loyal' },
      { id: 42, name: 'Cats' },
    ],
    pets: [
      { id: 1, name: 'Rex', tags: ['friendly'] },
      { id: 3, name: 'Mittens', status: 'pending' },
      { id: 12, name: 'Kiwi', category: { id: 7, name: 'Dogs' } },
      { id: 40, name: 'Far away' },
    ],
    orders: [{ id: 5, petId: 3, quantity: 2, complete: false }],
  },
  deprecation: {
    deprecatedAt: '2026-02-01T12:00:00Z',
    link: 'https://example.com/deprecations/pets',
    sunset: '2027-03-31T00:00:00Z',
    sunsetLink: 'https://example.com/sunset',
    afterSunset: false,
  },
}

/** Categories a partner made, with text that is easy to mangle. */
const TRICKY = [
  { name: 'Чайки 🐦 & "quotes" <b>', description: 'Ünïcödé\ttabs\nnew lines \\ back\\slashes 🐇🐇' },
  { name: '🦔'.repeat(200), description: 'x'.repeat(1999) + '🐟' },
  { name: '  spaces kept  ' },
]

async function upstreamShop(dir: string): Promise<RunningSandbox> {
  const file = join(dir, 'upstream.json')
  await writeFile(file, JSON.stringify(SHOP))
  const upstream = await startSandbox({ scenario: file })
  for (const category of TRICKY) {
    const created = await upstream.fetch('/v1/categories', { method: 'POST', headers: auth(KEY, true), body: JSON.stringify(category) })
    expect(created.status).toBe(201)
  }
  return upstream
}

/** What a client reads of a sandbox: the list, the orders, each pet with the deprecation headers. */
async function observed(sandbox: RunningSandbox, key: string, petIds: readonly number[]) {
  const get = async (path: string) => {
    const response = await sandbox.fetch(`/v1${path}`, { headers: auth(key) })
    return { status: response.status, body: await jsonOf(response), deprecation: response.headers.get('deprecation'), sunset: response.headers.get('sunset'), link: response.headers.get('link') }
  }
  return {
    categories: await get('/categories'),
    orders: await get('/store/orders'),
    pets: await Promise.all(petIds.map((id) => get(`/pets/${id}`))),
  }
}

describe('petstore-sandbox scenarios record', () => {
  it('records a service so that validate accepts the file and serve --scenario answers the same categories (ids, unicode, long text), pets, orders and deprecation headers', async () => {
    const dir = await tempDir()
    const upstream = await upstreamShop(dir)
    const out = join(dir, 'recorded.json')
    const recorded = await runCliHere(['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', KEY, '--out', out, '--pet-ids', '40', '--probe-pets', '10'])
    expect(recorded.stderr()).toBe('')
    expect(recorded.code).toBe(0)
    expect(recorded.stdout()).toContain('recorded recorded 1.0.0: 5 categories, 4 pets, 1 order; GET /pets/{petId} deprecated, sunset 2027-03-31T00:00:00Z')

    const validated = await runCliHere(['scenarios', 'validate', out])
    expect(validated.code).toBe(0)
    expect(validated.stdout()).toBe(`ok   ${out}: recorded 1.0.0\n`)

    const serve = await runCliHere(['serve', '--port', '0', '--quiet', '--scenario', out, '--api-key', 'replay-key'])
    expect(serve.code).toBe(0)
    const replay = { fetch: (path: string, init?: RequestInit) => fetch(`${serve.server!.origin}${path}`, init) } as RunningSandbox
    const petIds = [1, 3, 12, 40, 2]
    const before = await observed(upstream, KEY, petIds)
    expect(before.categories.body).toHaveLength(5)
    expect(await observed(replay, 'replay-key', petIds)).toEqual(before)

    // The next id continues after the highest recorded one, as it did upstream.
    const next = (sandbox: RunningSandbox, key: string) => sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: '{"name":"Next"}' }).then(jsonOf)
    expect(await next(replay, 'replay-key')).toEqual(await next(upstream, KEY))

    const file = await readFile(out, 'utf8')
    expect(file).not.toContain(KEY)
    expect(JSON.parse(file)).toMatchObject({ name: 'recorded', version: '1.0.0', description: `Recorded from ${upstream.origin}/v1 on ${new Date().toISOString().slice(0, 10)}` })
    expect(JSON.parse(file)).not.toHaveProperty('apiKeys')
  })

  it('writes categories, pets and orders as fixtures beside the scenario with --fixtures-dir, and takes --name, --scenario-version and --description', async () => {
    const dir = await tempDir()
    const upstream = await upstreamShop(dir)
    const out = join(dir, 'scenarios', 'staging.json')
    const recorded = await runCliHere([
      'scenarios', 'record', '--from', `${upstream.origin}/v1/`, '--api-key', KEY, '--out', out,
      '--fixtures-dir', join(dir, 'fixtures'), '--name', 'staging-copy', '--scenario-version', '3.1.4', '--description', 'Staging, Monday',
    ])
    expect(recorded.stderr()).toBe('')
    expect(recorded.code).toBe(0)
    const file = JSON.parse(await readFile(out, 'utf8')) as Record<string, unknown>
    expect(file).toMatchObject({
      name: 'staging-copy',
      version: '3.1.4',
      description: 'Staging, Monday',
      seed: {
        categories: { fixture: '../fixtures/categories/staging-copy.json' },
        pets: { fixture: '../fixtures/pets/staging-copy.json' },
        orders: { fixture: '../fixtures/orders/staging-copy.json' },
      },
    })
    expect(await readdir(join(dir, 'scenarios'))).toEqual(['staging.json'])
    const scenario = await loadScenario(out)
    expect(scenario.seed.categories).toEqual(await upstream.fetch('/v1/categories', { headers: auth(KEY) }).then(jsonOf))
    expect(scenario.seed.pets.map((pet) => pet.id)).toEqual([1, 3, 12])
  })

  it('reads only the pets --pet-ids names, and notes a named pet that is not found', async () => {
    const dir = await tempDir()
    const upstream = await upstreamShop(dir)
    const out = join(dir, 'pets.json')
    const recorded = await runCliHere(['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', KEY, '--out', out, '--pet-ids', '3,99'])
    expect(recorded.code).toBe(0)
    expect(recorded.stderr()).toBe('note: pet 99: not found (404), not recorded\n')
    expect((await loadScenario(out)).seed.pets).toEqual([SHOP.seed.pets[1]])
  })

  it('records a pet read past its sunset (410) as afterSunset, which the served scenario answers 410 too', async () => {
    const dir = await tempDir()
    const upstream = await startSandbox({ scenario: 'after-sunset' })
    const out = join(dir, 'gone.json')
    const recorded = await runCliHere(['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', 'sandbox-dev-key', '--out', out])
    expect(recorded.code).toBe(0)
    expect(recorded.stderr()).toContain('answered 410 Gone')
    const replay = await startSandbox({ scenario: out })
    const pet = await replay.fetch('/v1/pets/1', { headers: auth() })
    expect(pet.status).toBe(410)
    expect(pet.headers.get('sunset')).toBe((await upstream.fetch('/v1/pets/1', { headers: auth() })).headers.get('sunset'))
  })

  it('stops with exit 2, naming the base URL and a refused key without printing it, when the service answers 401; nothing is written', async () => {
    const dir = await tempDir()
    const upstream = await startSandbox({ apiKeys: ['the-right-key'] })
    const out = join(dir, 'refused.json')
    const recorded = await runCliHere(['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', KEY, '--out', out])
    expect(recorded.code).toBe(2)
    expect(recorded.stderr()).toBe(
      `petstore-sandbox: Cannot record from ${upstream.origin}/v1: the service refused the API key (401 on GET /categories, code invalid_api_key). Check --api-key. Nothing was written.\n`,
    )
    expect(recorded.stdout() + recorded.stderr()).not.toContain(KEY)
    expect(await readdir(dir)).toEqual([])
  })

  it('stops with exit 2 and says the service cannot be reached when nothing listens at the base URL', async () => {
    const dir = await tempDir()
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const recorded = await runCliHere(['scenarios', 'record', '--from', `http://127.0.0.1:${port}/v1`, '--api-key', KEY, '--out', join(dir, 'x.json')])
    expect(recorded.code).toBe(2)
    expect(recorded.stderr()).toBe(
      `petstore-sandbox: Cannot record from http://127.0.0.1:${port}/v1: the service cannot be reached (ECONNREFUSED, on GET /categories). Check --from and that the service is up. Nothing was written.\n`,
    )
    expect(await readdir(dir)).toEqual([])
  })

  it('refuses an existing --out (exit 1, the file untouched) and replaces it whole with --force', async () => {
    const dir = await tempDir()
    const upstream = await startSandbox()
    const out = join(dir, 'shop.json')
    await writeFile(out, 'keep me')
    const args = ['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', 'sandbox-dev-key', '--out', out]
    const refused = await runCliHere(args)
    expect(refused.code).toBe(1)
    expect(refused.stderr()).toBe(`petstore-sandbox: ${out} already exists: pass --force to replace, or choose another --out\n`)
    expect(await readFile(out, 'utf8')).toBe('keep me')
    const forced = await runCliHere([...args, '--force'])
    expect(forced.code).toBe(0)
    expect((await loadScenario(out)).seed.categories).toHaveLength(5)
    expect(await readdir(dir)).toEqual(['shop.json'])
  })

  it('refuses a --from that is not an http(s) URL and a name the scenario format refuses, as usage errors (exit 1)', async () => {
    const dir = await tempDir()
    const bad = await runCliHere(['scenarios', 'record', '--from', 'staging.example.com/v1', '--api-key', KEY, '--out', join(dir, 'a.json')])
    expect(bad.code).toBe(1)
    expect(bad.stderr()).toContain('Cannot record --from "staging.example.com/v1": not an absolute URL')
    const name = await runCliHere(['scenarios', 'record', '--from', 'http://127.0.0.1:1/v1', '--api-key', KEY, '--out', join(dir, 'my shop.json')])
    expect(name.code).toBe(1)
    expect(name.stderr()).toContain('Cannot record a scenario named "my shop": a scenario name must be 1-64 letters')
    expect(await readdir(dir)).toEqual([])
  })
})

/** A service that diverges from the contract in one planted way; every other answer is conformant. */
type Divergence = Partial<Record<'/v1/categories' | '/v1/store/orders' | '/v1/pets/1', { status?: number; type?: string; body: string }>>

async function divergentUpstream(divergence: Divergence): Promise<string> {
  const answers: Record<string, { status?: number; type?: string; body: string }> = {
    '/v1/categories': { body: '[{"id":1,"name":"Dogs"}]' },
    '/v1/store/orders': { body: '[]' },
    '/v1/pets/1': { body: '{"id":1,"name":"Rex"}' },
    ...divergence,
  }
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const answer = answers[request.url ?? '']
    if (request.headers.authorization !== `Bearer ${KEY}`) {
      response.writeHead(401, { 'content-type': 'application/json' }).end('{"code":"unauthorized","message":"no","status":401}')
    } else if (answer) {
      response.writeHead(answer.status ?? 200, { 'content-type': answer.type ?? 'application/json' }).end(answer.body)
    } else {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no","status":404}')
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
}

describe('scenarios record against a service that diverges from the contract', () => {
  it.each<{ name: string; divergence: Divergence; says: string }>([
    {
      name: 'a category without an id',
      divergence: { '/v1/categories': { body: '[{"id":1,"name":"Dogs"},{"name":"Cats"}]' } },
      says: 'GET /categories answered a record the contract refuses: category [1] (no id): id: missing (every record needs an integer id)',
    },
    {
      name: 'a category name over the 200 characters the scenario format allows',
      divergence: { '/v1/categories': { body: JSON.stringify([{ id: 3, name: 'n'.repeat(201) }]) } },
      says: 'GET /categories answered a record the contract refuses: category [0] (id 3): name: name must be at most 200 characters',
    },
    {
      name: 'two categories with one id',
      divergence: { '/v1/categories': { body: '[{"id":1,"name":"Dogs"},{"id":1,"name":"Cats"}]' } },
      says: 'the recorded scenario would not validate: seed.categories[1].id: duplicate id 1',
    },
    {
      name: 'a category list that is an object',
      divergence: { '/v1/categories': { body: '{"items":[]}' } },
      says: 'GET /categories answered an object, not an array of category records',
    },
    {
      name: 'a category list that is not JSON',
      divergence: { '/v1/categories': { type: 'text/html', body: '<h1>Welcome</h1>' } },
      says: 'GET /categories answered 200 with text/html, not application/json',
    },
    {
      name: 'an order without an id',
      divergence: { '/v1/store/orders': { body: '[{"petId":1}]' } },
      says: 'GET /store/orders answered a record the contract refuses: order [0] (no id): id: missing (every record needs an integer id)',
    },
    {
      name: 'a pet read answering another pet',
      divergence: { '/v1/pets/1': { body: '{"id":2,"name":"Mittens"}' } },
      says: 'GET /pets/1 answered the pet with id 2',
    },
    {
      name: 'a pet read answering 500',
      divergence: { '/v1/pets/1': { status: 500, body: '{"code":"internal_error","message":"boom","status":500}' } },
      says: 'GET /pets/1 answered 500, code internal_error',
    },
  ])('refuses $name, naming it; exit 2, nothing written', async ({ divergence, says }) => {
    const dir = await tempDir()
    const base = await divergentUpstream(divergence)
    const recorded = await runCliHere(['scenarios', 'record', '--from', base, '--api-key', KEY, '--out', join(dir, 'x.json'), '--pet-ids', '1', '--probe-pets', '0'])
    expect(recorded.code).toBe(2)
    expect(recorded.stderr()).toBe(`petstore-sandbox: Cannot record from ${base}: ${says}. Nothing was written.\n`)
    expect(await readdir(dir)).toEqual([])
  })

  it('records the conformant answers of the same server (the divergences above are the only reason it refused), leaving out category fields the contract does not name, with a note', async () => {
    const dir = await tempDir()
    const base = await divergentUpstream({ '/v1/categories': { body: '[{"id":1,"name":"Dogs","createdAt":"2026-01-01","slug":"dogs"}]' } })
    const out = join(dir, 'fine.json')
    const recorded = await runCliHere(['scenarios', 'record', '--from', base, '--api-key', KEY, '--out', out, '--pet-ids', '1', '--probe-pets', '0'])
    expect(recorded.stderr()).toBe('note: categories: fields the contract does not name were left out (createdAt, slug)\n')
    expect(recorded.code).toBe(0)
    expect(await loadScenario(out)).toMatchObject({ seed: { categories: [{ id: 1, name: 'Dogs' }], pets: [{ id: 1, name: 'Rex' }], orders: [] } })
    expect(JSON.parse(await readFile(out, 'utf8'))).not.toHaveProperty('deprecation')
  })

  it('stops with exit 2 when the service accepts the connection but does not answer within --timeout', async () => {
    const dir = await tempDir()
    const silent = createServer(() => {})
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => {
      silent.closeAllConnections()
      return new Promise<void>((resolve) => silent.close(() => resolve()))
    })
    const base = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1`
    const recorded = await runCliHere(['scenarios', 'record', '--from', base, '--api-key', KEY, '--out', join(dir, 'x.json'), '--timeout', '200'])
    expect(recorded.code).toBe(2)
    expect(recorded.stderr()).toBe(`petstore-sandbox: Cannot record from ${base}: the service cannot be reached (no answer within 200 ms, on GET /categories). Check --from and that the service is up. Nothing was written.\n`)
    expect(await readdir(dir)).toEqual([])
  })
})

describe('recordScenario()', () => {
  it('returns a scenario object that loadScenario accepts, with the categories as listed and without the key', async () => {
    const upstream = await startSandbox()
    const { scenario, notes } = await recordScenario({ from: `${upstream.origin}/v1`, apiKey: 'sandbox-dev-key', name: 'copy' })
    expect(notes).toEqual([])
    const loaded = await loadScenario(scenario)
    expect(loaded.seed.categories).toEqual(await upstream.fetch('/v1/categories', { headers: auth() }).then(jsonOf))
    expect(JSON.stringify(scenario)).not.toContain('sandbox-dev-key')
  })

  it('throws PetstoreError upstream_refused_key on a 401', async () => {
    const upstream = await startSandbox({ apiKeys: ['k1'] })
    await expect(recordScenario({ from: `${upstream.origin}/v1`, apiKey: 'k2', name: 'copy' })).rejects.toMatchObject({ name: 'PetstoreError', code: 'upstream_refused_key' })
  })
})

/** Most an endless upstream writes before it stops writing (the connection left open): far above any cap a test gives. */
const ENDLESS_STOPS_AT = 48 * 1024 * 1024

/** A service that takes the key and answers `/categories` 200 with a JSON array that never ends (as fast as read, or a byte every 50 ms). */
async function endlessUpstream(fast: boolean): Promise<{ base: string; written: () => number; hungUp: () => Promise<void> }> {
  let written = 0
  const chunk = Buffer.from('{"id":1,"name":"Dogs"},'.repeat(700))
  const server = createServer((_request: IncomingMessage, response: ServerResponse) => {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.write('[')
    if (!fast) {
      const timer = setInterval(() => {
        response.write(' ')
        written += 1
      }, 50)
      response.once('close', () => clearInterval(timer))
      return
    }
    const pump = () => {
      while (!response.destroyed && written < ENDLESS_STOPS_AT) {
        written += chunk.length
        if (!response.write(chunk)) return void response.once('drain', pump)
      }
    }
    pump()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  // The recorder has hung up once the upstream holds no connection. (Not "once the answer closed": under load the
  // recorder's 300 ms can pass before its request reaches the handler, and then no answer ever starts.)
  const hungUp = async () => {
    const open = () => new Promise<number>((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))))
    while ((await open()) > 0) await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, written: () => written, hungUp }
}

describe('scenarios record against a service whose answers are too large, never end or are slow', () => {
  it('stops at --max-answer-bytes on a body that never ends, naming the request and the cap; exit 2, nothing written, the connection let go of', async () => {
    const dir = await tempDir()
    const upstream = await endlessUpstream(true)
    const recorded = await runCliHere(['scenarios', 'record', '--from', upstream.base, '--api-key', KEY, '--out', join(dir, 'x.json'), '--max-answer-bytes', '64KiB', '--timeout', '60000'])
    expect(recorded.stderr()).toBe(
      `petstore-sandbox: Cannot record from ${upstream.base}: GET /categories answered more than 65536 bytes, the most the recording reads of one answer (--max-answer-bytes); the rest was not read. Nothing was written.\n`,
    )
    expect(recorded.code).toBe(2)
    expect(await readdir(dir)).toEqual([])
    await upstream.hungUp()
    // Read no further than the cap: what the upstream wrote past it sits in socket buffers, far below what it would send.
    expect(upstream.written()).toBeLessThan(ENDLESS_STOPS_AT / 2)
  })

  it('refuses a whole list larger than maxAnswerBytes with upstream_nonconformant, and records it under a cap that holds it', async () => {
    const list = JSON.stringify(Array.from({ length: 2000 }, (_, index) => ({ id: index + 1, name: `category ${index + 1}` })))
    const base = await divergentUpstream({ '/v1/categories': { body: list } })
    expect(list.length).toBeGreaterThan(16_384)
    await expect(recordScenario({ from: base, apiKey: KEY, name: 'big', maxAnswerBytes: 16_384, probePets: 0 })).rejects.toMatchObject({
      name: 'PetstoreError',
      code: 'upstream_nonconformant',
      message: `Cannot record from ${base}: GET /categories answered more than 16384 bytes, the most the recording reads of one answer (--max-answer-bytes); the rest was not read.`,
    })
    const { scenario } = await recordScenario({ from: base, apiKey: KEY, name: 'big', maxAnswerBytes: list.length, probePets: 0 })
    expect(scenario.seed.categories).toHaveLength(2000)
  })

  it('stops with exit 2 and the cannot-be-reached line when the body drips and does not end within --timeout', async () => {
    const dir = await tempDir()
    const upstream = await endlessUpstream(false)
    const recorded = await runCliHere(['scenarios', 'record', '--from', upstream.base, '--api-key', KEY, '--out', join(dir, 'x.json'), '--timeout', '300'])
    // ("no answer" when, on a loaded machine, even the answer's head came later than that.)
    expect(recorded.stderr()).toMatch(
      new RegExp(
        `^petstore-sandbox: Cannot record from ${upstream.base.replaceAll('.', '\\.')}: the service cannot be reached \\(no (?:complete )?answer within 300 ms, on GET /categories\\)\\. Check --from and that the service is up\\. Nothing was written\\.\n$`,
      ),
    )
    expect(recorded.code).toBe(2)
    expect(await readdir(dir)).toEqual([])
    await upstream.hungUp()
  })

  it('stops at --deadline when every pet exists and each is answered slowly; exit 2, the line says where it stopped, nothing written', async () => {
    const dir = await tempDir()
    let petsAsked = 0
    const server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const pet = /^\/v1\/pets\/(\d+)$/.exec(request.url ?? '')
      const answer = () => response.writeHead(200, { 'content-type': 'application/json' }).end(pet ? JSON.stringify({ id: Number(pet[1]), name: `Pet ${pet[1]}` }) : '[]')
      if (!pet) return answer()
      petsAsked += 1
      setTimeout(answer, 100)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    })
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
    const recorded = await runCliHere(['scenarios', 'record', '--from', base, '--api-key', KEY, '--out', join(dir, 'x.json'), '--probe-pets', '1000', '--timeout', '3000', '--deadline', '700'])
    expect(recorded.stderr()).toMatch(
      new RegExp(
        `^petstore-sandbox: Cannot record from ${base.replace(/[.]/g, '\\.')}: the recording took longer than its deadline of 700 ms \\(stopped on GET /pets/\\d+, after \\d+ answers\\)\\. Give more time with --deadline, or read fewer pets with --pet-ids or --probe-pets\\. Nothing was written\\.\\n$`,
      ),
    )
    expect(recorded.code).toBe(2)
    expect(await readdir(dir)).toEqual([])
    expect(petsAsked).toBeLessThan(1000)
  })
})

describe('scenarios record progress', () => {
  it('prints a progress line on stderr every 100 pet reads, then records them all', async () => {
    const dir = await tempDir()
    const server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const pet = /^\/v1\/pets\/(\d+)$/.exec(request.url ?? '')
      if (pet && Number(pet[1]) > 250) return void response.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no","status":404}')
      response.writeHead(200, { 'content-type': 'application/json' }).end(pet ? JSON.stringify({ id: Number(pet[1]), name: `Pet ${pet[1]}` }) : '[]')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
    const recorded = await runCliHere(['scenarios', 'record', '--from', base, '--api-key', KEY, '--out', join(dir, 'pets.json'), '--probe-pets', '1'])
    expect(recorded.code).toBe(0)
    const lines = recorded.stderr().trimEnd().split('\n')
    // @note A line may also come after 10 s without one, on a very slow machine: the two every-100 lines are what must be there.
    expect(lines).toEqual(expect.arrayContaining(['reading pets: 100 read, 100 found, last id 100', 'reading pets: 200 read, 200 found, last id 200']))
    expect(lines.every((line) => /^reading pets: \d+ read, \d+ found, last id \d+$/.test(line))).toBe(true)
    expect(recorded.stdout()).toContain('0 categories, 250 pets, 0 orders')
  })
})
