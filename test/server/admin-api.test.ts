/** The admin API under /__sandbox/: every route with and without auth, and with the admin token. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { DEV_API_KEY, tenantId } from '../../src/server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox, useStore } from '../support/sandbox-server.js'
import { exchange } from '../support/raw-http.js'
import { STORES } from '../support/stores.js'

const ADMIN = 'admin-token-for-tests'

/** The credential headers issue 20 F13 found served in clear. */
const F13_HEADERS = [
  'apikey',
  'x-goog-api-key',
  'x-amz-security-token',
  'ocp-apim-subscription-key',
  'private-token',
  'x-vault-token',
  'x-forwarded-authorization',
  'x-csrf-token',
]

const TENANT_ROUTES = [
  { method: 'GET', path: '/__sandbox/scenarios' },
  { method: 'PUT', path: '/__sandbox/scenario', body: '{"name":"empty"}' },
  { method: 'POST', path: '/__sandbox/reset' },
  { method: 'GET', path: '/__sandbox/requests' },
  { method: 'DELETE', path: '/__sandbox/requests' },
  { method: 'GET', path: '/__sandbox/state' },
  { method: 'GET', path: '/__sandbox/tenants' },
  { method: 'GET', path: '/__sandbox/answers' },
  { method: 'POST', path: '/__sandbox/answers', body: '{"operation":"listCategories","status":500}' },
]

async function tempScenariosDir(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-scenarios-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), JSON.stringify(content))
  return dir
}

/** A sandbox on a scenarios directory of `files`, and its answer to a switch to `name`: 500 invalid_scenario. */
async function brokenSwitch(files: Record<string, unknown>, name: string) {
  const scenariosDir = await tempScenariosDir(files)
  const { fetch } = await startSandbox({ scenariosDir })
  const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: JSON.stringify({ name }) })
  const error = (await jsonOf(response)) as { message: string }
  expectErrorBody(error, 500, 'invalid_scenario')
  return { error, scenariosDir, fetch }
}

describe.each(STORES)('admin API ($name store)', (kind) => {
  useStore(kind)

  it('answers health without auth', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/__sandbox/health')
    expect(response.status).toBe(200)
    const body = (await jsonOf(response)) as Record<string, unknown>
    expect(body).toEqual({ status: 'ok', version: expect.stringMatching(/^\d+\.\d+\.\d+/), uptimeSeconds: expect.any(Number), storage: { kind: kind.name, ok: true } })
  })

  it("counts health's uptime on the monotonic clock: a machine clock stepped a year forward leaves it as it was", async () => {
    const { fetch } = await startSandbox()
    const uptime = async () => ((await jsonOf(await fetch('/__sandbox/health'))) as { uptimeSeconds: number }).uptimeSeconds
    const before = await uptime()
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 365 * 24 * 3600 * 1000 })
    onTestFinished(() => void vi.useRealTimers())
    expect(await uptime()).toBeLessThan(before + 60)
  })

  it('serves the OpenAPI document without auth, with this server as its first server', async () => {
    const { fetch, origin } = await startSandbox()
    const response = await fetch('/__sandbox/openapi.json')
    expect(response.status).toBe(200)
    const document = (await jsonOf(response)) as { openapi: string; servers: { url: string }[]; paths: Record<string, unknown> }
    expect(document.openapi).toBe('3.1.0')
    expect(document.servers[0]!.url).toBe(`${origin}/v1`)
    expect(Object.keys(document.paths)).toContain('/categories')
  })

  it('serves partners the interface’s contract: open to fields the service may add, the sandbox’s limits as keywords, pets and orders unpublished', async () => {
    const { fetch } = await startSandbox()
    const document = (await jsonOf(await fetch('/__sandbox/openapi.json'))) as ServedDocument
    const { Category, Error: ErrorSchema, NewCategory, Pet } = document.components.schemas
    expect(Category).not.toHaveProperty('additionalProperties')
    expect(ErrorSchema).not.toHaveProperty('additionalProperties')
    expect(NewCategory).not.toHaveProperty('additionalProperties')
    expect(Category!.properties!['id']).toEqual(expect.objectContaining({ type: 'integer', format: 'int64', minimum: 1, maximum: Number.MAX_SAFE_INTEGER }))
    expect(Category!.properties!['name']).toEqual(expect.objectContaining({ pattern: '\\S', maxLength: 200, description: expect.stringContaining('Sandbox limit (the interface shows none): not blank, at most 200 characters') as unknown }))
    expect(JSON.stringify([Category, NewCategory, ErrorSchema])).not.toContain('x-sandbox')
    expect(Pet).not.toHaveProperty('required')
    expect(Pet).toHaveProperty('x-sandbox')
    const ajv = new Ajv2020({ strict: false })
    const validCategory = ajv.compile({ ...Category, components: document.components })
    expect(validCategory({ id: 7, name: 'Dogs', addedLater: true })).toBe(true)
    expect(validCategory({ id: 7 })).toBe(false)
  })

  it('gives every path parameter an example the default scenario answers, and the create an example body it accepts; a 201 names no Location (issue 22)', async () => {
    const { fetch } = await startSandbox()
    const document = (await jsonOf(await fetch('/__sandbox/openapi.json'))) as ServedDocument & { paths: Record<string, Record<string, OperationObject>> }
    let filled = 0
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const parameters = operation.parameters ?? []
        for (const parameter of parameters) expect(parameter, `${method} ${path} ${parameter.name}`).toHaveProperty('example')
        const url = parameters.reduce((at, { name, example }) => at.replace(`{${name}}`, String(example)), path)
        const example = operation.requestBody?.content['application/json']?.example
        if (operation.requestBody) expect(example, `${method} ${path}`).toBeDefined()
        const response = await fetch(`/v1${url}`, {
          method: method.toUpperCase(),
          headers: { ...auth(), ...(example !== undefined && { 'content-type': 'application/json' }) },
          ...(example !== undefined && { body: JSON.stringify(example) }),
        })
        expect(response.status, `${method} ${url}`).toBe(Number(Object.keys(operation.responses).find((status) => /^2\d\d$/.test(status))))
        if (response.status === 201) expect(response.headers.get('location')).toBeNull()
        filled += parameters.length
      }
    }
    expect(filled).toBeGreaterThan(0)
  })

  it('says in the served document when --strict refuses unknown fields of a NewCategory', async () => {
    const loose = (await jsonOf(await (await startSandbox()).fetch('/__sandbox/openapi.json'))) as ServedDocument
    const strict = (await jsonOf(await (await startSandbox({ strict: true })).fetch('/__sandbox/openapi.json'))) as ServedDocument
    expect(loose.components.schemas.NewCategory).not.toHaveProperty('additionalProperties')
    expect(strict.components.schemas.NewCategory!['additionalProperties']).toBe(false)
  })

  it('lists the origin a proxy’s client used (X-Forwarded-Proto, X-Forwarded-Host) as the first server with trustProxy', async () => {
    const { fetch } = await startSandbox({ trustProxy: true })
    const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'sandbox.shop.test' }
    const document = (await jsonOf(await fetch('/__sandbox/openapi.json', { headers }))) as ServedDocument
    expect(document.servers[0]!.url).toBe('https://sandbox.shop.test/v1')
    const forged = { 'x-forwarded-proto': 'javascript', 'x-forwarded-host': '<script>' }
    const plain = (await jsonOf(await fetch('/__sandbox/openapi.json', { headers: forged }))) as ServedDocument
    expect(plain.servers[0]!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/)
  })

  it('ignores a client’s X-Forwarded-Host and -Proto unless trustProxy, and says what the document varies on (issue 20 F14)', async () => {
    const { fetch, origin } = await startSandbox()
    const poisoned = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'attacker.test' }
    const response = await fetch('/__sandbox/openapi.json', { headers: poisoned })
    expect(((await jsonOf(response)) as ServedDocument).servers[0]!.url).toBe(`${origin}/v1`)
    expect(varied(response)).toEqual([])
    expect(response.headers.get('cache-control')).toMatch(/\bprivate\b/)

    const { fetch: behindProxy } = await startSandbox({ trustProxy: true })
    const proxied = await behindProxy('/__sandbox/openapi.json', { headers: poisoned })
    expect(((await jsonOf(proxied)) as ServedDocument).servers[0]!.url).toBe('https://attacker.test/v1')
    expect(varied(proxied)).toEqual(['x-forwarded-host', 'x-forwarded-proto'])
    expect(proxied.headers.get('cache-control')).toMatch(/\bprivate\b/)
  })

  it('never lists the request’s Host as the first server: the address the connection reached, whatever Host says (issue 22)', async () => {
    const { server, origin } = await startSandbox()
    const { port } = server.address() as AddressInfo
    for (const host of ['evil.example:9999', 'localhost', `127.0.0.1:${port}`]) {
      const { body, headers } = await getWithHost(port, '/__sandbox/openapi.json', host)
      expect((JSON.parse(body) as ServedDocument).servers[0]!.url, host).toBe(`${origin}/v1`)
      expect(headers['cache-control']).toBe('private, no-cache')
    }
  })

  it('takes the last X-Forwarded-Host and -Proto, the ones the trusted proxy appended, not a client’s own (issue 22)', async () => {
    const { fetch } = await startSandbox({ trustProxy: true })
    const headers = { 'x-forwarded-proto': 'http, https', 'x-forwarded-host': 'attacker.test, sandbox.shop.test:8443' }
    const document = (await jsonOf(await fetch('/__sandbox/openapi.json', { headers }))) as ServedDocument
    expect(document.servers[0]!.url).toBe('https://sandbox.shop.test:8443/v1')
  })

  it('takes a publicUrl that already ends with the base path as the API’s base, not …/v1/v1 (issue 22)', async () => {
    const { fetch } = await startSandbox({ publicUrl: 'https://sandbox.example.com/v1' })
    expect(((await jsonOf(await fetch('/__sandbox/openapi.json'))) as ServedDocument).servers[0]!.url).toBe('https://sandbox.example.com/v1')
  })

  it('lists the configured publicUrl as the first server whatever the request says (issue 20 F14)', async () => {
    const { fetch } = await startSandbox({ publicUrl: 'https://sandbox.example.com/petstore/', trustProxy: true })
    const response = await fetch('/__sandbox/openapi.json', { headers: { 'x-forwarded-host': 'attacker.test', 'x-forwarded-proto': 'http' } })
    expect(((await jsonOf(response)) as ServedDocument).servers[0]!.url).toBe('https://sandbox.example.com/petstore/v1')
    expect(varied(response)).toEqual([])
    expect(response.headers.get('cache-control')).toBe('no-cache')
  })

  it.each(['ftp://sandbox.example.com', 'https://user:pw@sandbox.example.com', 'https://sandbox.example.com/?x=1', 'sandbox.example.com', 'javascript:alert(1)'])(
    'refuses publicUrl %s with invalid_option naming the option',
    async (publicUrl) => {
      await expect(startSandbox({ publicUrl })).rejects.toMatchObject({ code: 'invalid_option', message: expect.stringContaining('publicUrl') as unknown })
    },
  )

  it('journals every credential header and query parameter of the finding as [redacted], to the tenant and to the admin token (issue 20 F13)', async () => {
    const { fetch } = await startSandbox({ adminToken: ADMIN })
    const credentials = Object.fromEntries(F13_HEADERS.map((name, i) => [name, `SECRET-h${i}`]))
    const readable = { 'content-type': 'application/json', 'idempotency-key': 'retry-7', 'x-correlation-id': 'c-1', 'user-agent': 'partner/1.0' }
    const sent = await fetch('/v1/categories?api_key=SECRET-q1&page=2&access_token=SECRET-q2&X-Amz-Signature=SECRET-q3', { headers: { ...auth(), ...credentials, ...readable } })
    expect(sent.status).toBe(200)
    const origin = new URL(sent.url).origin
    for (const headers of [auth(), { authorization: `Bearer ${ADMIN}` }]) {
      const query = headers.authorization === auth().authorization ? '' : `?tenant=${tenantId(DEV_API_KEY)}`
      const journal = await fetch(`/__sandbox/requests${query}`, { headers })
      const text = await journal.text()
      expect(text).not.toContain('SECRET-')
      const [entry] = JSON.parse(text) as { url: string; request: { headers: Record<string, string> } }[]
      for (const name of F13_HEADERS) expect(entry!.request.headers[name], name).toBe('[redacted]')
      expect(entry!.request.headers).toMatchObject(readable)
      expect(entry!.url).toBe(`${origin}/v1/categories?api_key=[redacted]&page=2&access_token=[redacted]&X-Amz-Signature=[redacted]`)
    }
  })

  it('redacts the headers and query parameters an operator adds, beyond the defaults (issue 20 F13)', async () => {
    const { fetch } = await startSandbox({ redactHeaders: ['X-Partner-Thing'], redactQueryParams: ['sid'] })
    await fetch('/v1/categories?sid=SECRET-1&SID=SECRET-2&page=2', { headers: { ...auth(), 'x-partner-thing': 'SECRET-3', 'x-other': 'shown' } })
    const [entry] = (await jsonOf(await fetch('/__sandbox/requests', { headers: auth() }))) as { url: string; request: { headers: Record<string, string> } }[]
    expect(JSON.stringify(entry)).not.toContain('SECRET-')
    expect(entry!.request.headers).toMatchObject({ 'x-partner-thing': '[redacted]', 'x-other': 'shown' })
    expect(entry!.url).toMatch(/\/v1\/categories\?sid=\[redacted\]&SID=\[redacted\]&page=2$/)
  })

  it.each(TENANT_ROUTES)('answers 401 missing_api_key on $method $path without a key', async ({ method, path, body }) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, { method, headers: { 'content-type': 'application/json' }, body })
    expect(response.status).toBe(401)
    expect(response.headers.get('www-authenticate')).toBe('Bearer')
    expectErrorBody(await jsonOf(response), 401, 'missing_api_key')
  })

  it.each(TENANT_ROUTES)('answers 401 invalid_api_key on $method $path with an unknown key', async ({ method, path, body }) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, { method, headers: auth('nope', true), body })
    expectErrorBody(await jsonOf(response), 401, 'invalid_api_key')
  })

  it('lists the scenarios with the caller’s active one marked', async () => {
    const { fetch } = await startSandbox()
    const scenarios = (await jsonOf(await fetch('/__sandbox/scenarios', { headers: auth() }))) as {
      name: string
      version: string
      description: string
      active: boolean
    }[]
    expect(scenarios.map((scenario) => scenario.name)).toEqual(['after-sunset', 'default', 'empty', 'flaky', 'large-catalog'])
    expect(scenarios.filter((scenario) => scenario.active).map((scenario) => scenario.name)).toEqual(['default'])
    expect(Object.keys(scenarios[0]!).sort()).toEqual(['active', 'description', 'name', 'switchable', 'version'])
  })

  it('switches the caller’s scenario and reseeds its store', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"empty"}' })
    expect(response.status).toBe(200)
    expect(await jsonOf(response)).toEqual({
      scenario: { name: 'empty', version: '1.0.0', description: expect.any(String) },
    })
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth() }))).toEqual([])
    const scenarios = (await jsonOf(await fetch('/__sandbox/scenarios', { headers: auth() }))) as { name: string; active: boolean }[]
    expect(scenarios.find((scenario) => scenario.active)?.name).toBe('empty')
  })

  it.each([
    { name: 'malformed JSON', body: '{"name":', code: 'invalid_json' },
    { name: 'an array', body: '["empty"]', code: 'invalid_body' },
    { name: 'an empty body', body: '', code: 'invalid_body' },
    { name: 'no name', body: '{}', code: 'missing_field' },
    { name: 'a name that is not a string', body: '{"name":1}', code: 'invalid_field' },
    { name: 'a text/plain body', body: '{"name":"empty"}', code: 'unsupported_media_type', contentType: 'text/plain' },
  ])('answers 400 $code to PUT /__sandbox/scenario with $name', async ({ body, code, contentType }) => {
    const { fetch } = await startSandbox()
    const response = await fetch('/__sandbox/scenario', {
      method: 'PUT',
      headers: { ...auth(), 'content-type': contentType ?? 'application/json' },
      body,
    })
    expectErrorBody(await jsonOf(response), 400, code)
  })

  it('answers 413 to an admin body over 1 MiB', async () => {
    const { fetch } = await startSandbox()
    const body = JSON.stringify({ name: 'x'.repeat(1024 * 1024) })
    const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body })
    expectErrorBody(await jsonOf(response), 413, 'payload_too_large')
  })

  it.each(['nope', '../../etc/passwd', 'scenarios/default.json', '/etc/passwd', 'default.json'])(
    'answers 404 unknown_scenario to PUT /__sandbox/scenario with %j',
    async (name) => {
      const { fetch } = await startSandbox()
      const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: JSON.stringify({ name }) })
      expectErrorBody(await jsonOf(response), 404, 'unknown_scenario')
      expect(await jsonOf(await fetch('/v1/categories', { headers: auth() }))).toHaveLength(5)
    },
  )

  it('switches to a scenario of the scenarios directory by name', async () => {
    const scenariosDir = await tempScenariosDir({
      'tiny.json': { name: 'tiny', version: '2.0.0', description: 'One category', seed: { categories: [{ name: 'Only' }] } },
    })
    const { fetch } = await startSandbox({ scenariosDir })
    const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"tiny"}' })
    expect(response.status).toBe(200)
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth() }))).toEqual([{ id: 1, name: 'Only' }])
  })

  it('answers 500 with the reason when a directory scenario is broken, without the file’s path', async () => {
    const { error, scenariosDir } = await brokenSwitch({ 'broken.json': { name: 'broken', version: 'x', description: 'bad' } }, 'broken')
    expect(error.message).toContain('version')
    expect(error.message).toContain('broken.json')
    expect(error.message).not.toContain(scenariosDir)
  })

  it('answers 500 for a scenario whose fixture outside its directory is not JSON, naming neither its path nor any of its bytes (attack42 F4)', async () => {
    const outside = await mkdtemp(join(tmpdir(), 'sandbox-outside-'))
    onTestFinished(() => rm(outside, { recursive: true, force: true }))
    const secret = join(outside, 'environ')
    await writeFile(secret, 'SECRET_TOKEN=hunter2')
    const scenariosDir = await tempScenariosDir({ 'leaky.json': { name: 'leaky', version: '1.0.0', description: 'A fixture outside', seed: { orders: { fixture: secret } } } })
    const { fetch } = await startSandbox({ scenariosDir })
    const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"leaky"}' })
    const error = (await jsonOf(response)) as { message: string }
    expectErrorBody(error, 500, 'invalid_scenario')
    // Before: "Invalid JSON in /tmp/…/environ: Unexpected token 'S', … is not valid JSON".
    expect(error.message).toContain('environ')
    expect(error.message).not.toContain(outside)
    expect(error.message).not.toMatch(/'S'|SECRET|hunter2/)
  })

  it('answers 500 for a scenario whose fixture is in a directory whose name holds spaces, naming the fixture by its name alone (review40 R5)', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'sandbox-outside-'))
    onTestFinished(() => rm(parent, { recursive: true, force: true }))
    const outside = join(parent, 'private notes of ops')
    await mkdir(outside)
    const fixture = join(outside, 'env file')
    await writeFile(fixture, 'SECRET_TOKEN=hunter2')
    const scenariosDir = await tempScenariosDir({ 'leaky.json': { name: 'leaky', version: '1.0.0', description: 'A fixture outside', seed: { orders: { fixture } } } })
    const { fetch } = await startSandbox({ scenariosDir })
    const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"leaky"}' })
    const error = (await jsonOf(response)) as { message: string }
    expectErrorBody(error, 500, 'invalid_scenario')
    expect(error.message).toContain('Invalid JSON in env file')
    // Before: "Invalid JSON in /tmp/sandbox-outside-…/private notes of ops/env file" cut to "private notes of env file".
    expect(error.message).not.toMatch(/private|notes|sandbox-outside/)
  })

  it('refuses a directory scenario named otherwise than its file, saying both names; it is listed under neither (trial41 R1)', async () => {
    // Before: 200 {"scenario":{"name":"other",…}}, a scenario with two names (a switch to "other" 404).
    const { error, fetch } = await brokenSwitch({ 'petdemo.json': { name: 'other', version: '1.0.0', description: 'Misnamed' } }, 'petdemo')
    expect(error.message).toContain('petdemo.json: it is named "other", not "petdemo" as its file')
    const listed = (await jsonOf(await fetch('/__sandbox/scenarios', { headers: auth() }))) as { name: string }[]
    expect(listed.map((scenario) => scenario.name)).not.toContain('other')
    expect(listed.map((scenario) => scenario.name)).not.toContain('petdemo')
  })

  it('reseeds a directory scenario as its file is now on a reset without a body: an edit is picked up, a broken edit answered (trial41 R2)', async () => {
    const shop = (names: string[]) => ({ name: 'shop', version: '1.0.0', description: 'A shop', seed: { categories: names.map((name) => ({ name })) } })
    const scenariosDir = await tempScenariosDir({ 'shop.json': shop(['Before']) })
    const { fetch } = await startSandbox({ scenariosDir })
    const names = async () => ((await jsonOf(await fetch('/v1/categories', { headers: auth() }))) as { name: string }[]).map((category) => category.name)
    expect((await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"shop"}' })).status).toBe(200)
    expect(await names()).toEqual(['Before'])
    await writeFile(join(scenariosDir, 'shop.json'), JSON.stringify(shop(['After', 'Edited'])))
    const reset = await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })
    // Before: reseeded from the version read at the switch: ["Before"].
    expect(await jsonOf(reset)).toEqual({ scenario: expect.objectContaining({ name: 'shop' }), categories: 2 })
    expect(await names()).toEqual(['After', 'Edited'])
    // A broken edit: the reset is refused, the tenant's data kept.
    expect((await fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"Mine"}' })).status).toBe(201)
    await writeFile(join(scenariosDir, 'shop.json'), '{"name":"shop",')
    const refused = await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })
    expectErrorBody(await jsonOf(refused), 500, 'invalid_scenario')
    expect(await names()).toEqual(['After', 'Edited', 'Mine'])
    // A file deleted since: reseeded as the tenant had it.
    await rm(join(scenariosDir, 'shop.json'))
    expect((await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })).status).toBe(200)
    expect(await names()).toEqual(['After', 'Edited'])
  })

  // @note In memory only: a durable store keeps a tenant's scenario by name, and one opened again takes the start's version
  // of that name (its categories its own): left open, see the note.
  it.runIf(kind.name === 'memory')('keeps a tenant switched to a newer version of the start scenario (its file edited since start) as holding state: never evicted as on its seed, nor brought back on the start version (attack47 F5)', async () => {
    const shop = (version: string, names: string[]) => ({ name: 'shop', version, description: 'A shop', seed: { categories: names.map((name) => ({ name })) } })
    const scenariosDir = await tempScenariosDir({ 'shop.json': shop('1.0.0', ['At start']) })
    const { fetch } = await startSandbox({ scenariosDir, scenario: 'shop', anyKey: true, maxTenants: 2 })
    await writeFile(join(scenariosDir, 'shop.json'), JSON.stringify(shop('2.0.0', ['New 1', 'New 2'])))
    const switched = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('a', true), body: '{"name":"shop"}' })
    expect(((await jsonOf(switched)) as { scenario: { version: string } }).scenario.version).toBe('2.0.0')
    // Three other keys at a cap of two tenants: tenants that lose nothing by leaving make room.
    for (const key of ['b', 'c', 'd']) expect((await fetch('/v1/categories', { headers: auth(key) })).status).toBe(200)
    // Before: taken for on its seed (its scenario's name the start's), evicted, and back on 1.0.0's pets, faults and
    // version (torn), its categories too once the store left was collected.
    const state = (await jsonOf(await fetch('/__sandbox/state', { headers: auth('a') }))) as { scenario: { version: string }; categories: { name: string }[] }
    expect(state.scenario.version).toBe('2.0.0')
    expect(state.categories.map((category) => category.name)).toEqual(['New 1', 'New 2'])
  })

  it('resets the caller’s data, ids and journal to its scenario', async () => {
    const { fetch } = await startSandbox()
    await fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"x"}' })
    const response = await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })
    expect(response.status).toBe(200)
    expect(await jsonOf(response)).toEqual({ scenario: expect.objectContaining({ name: 'default' }), categories: 5 })
    expect(await jsonOf(await fetch('/__sandbox/requests', { headers: auth() }))).toEqual([])
    const created = await fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"y"}' })
    expect(await jsonOf(created)).toEqual({ id: 6, name: 'y' })
  })

  it('keeps the scenario the tenant chose on reset (unlike the library, whose reset returns to its first)', async () => {
    const { fetch } = await startSandbox()
    const switched = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"empty"}' })
    expect(switched.status).toBe(200)
    await fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"x"}' })
    const response = await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })
    expect(await jsonOf(response)).toEqual({ scenario: expect.objectContaining({ name: 'empty' }), categories: 0 })
  })

  it('lists the journal newest last, filters it by method and path, and empties it', async () => {
    const { fetch } = await startSandbox()
    await fetch('/v1/categories', { headers: auth() })
    await fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"x"}' })
    await fetch('/v1/pets/1', { headers: auth() })
    const all = (await jsonOf(await fetch('/__sandbox/requests', { headers: auth() }))) as {
      id: number
      method: string
      path: string
      request: { headers: Record<string, string> }
      response: { status: number }
    }[]
    expect(all.map((entry) => `${entry.method} ${entry.path} ${entry.response.status}`)).toEqual([
      'GET /v1/categories 200',
      'POST /v1/categories 201',
      'GET /v1/pets/1 200',
    ])
    expect(all[0]!.request.headers['authorization']).toBe('[redacted]')
    const posts = (await jsonOf(await fetch('/__sandbox/requests?method=post', { headers: auth() }))) as unknown[]
    expect(posts).toHaveLength(1)
    const pets = (await jsonOf(await fetch('/__sandbox/requests?path=/v1/pets/*', { headers: auth() }))) as unknown[]
    expect(pets).toHaveLength(1)
    const cleared = await fetch('/__sandbox/requests', { method: 'DELETE', headers: auth() })
    expect(cleared.status).toBe(204)
    expect(await cleared.text()).toBe('')
    expect(await jsonOf(await fetch('/__sandbox/requests', { headers: auth() }))).toEqual([])
  })

  it('journals the commonest integration mistakes (404, 405) with the X-Request-Id they were answered with, and filters by status and operation', async () => {
    const { fetch } = await startSandbox()
    const wrongPath = await fetch('/v1/categorie', { headers: auth() })
    const wrongMethod = await fetch('/v1/categories', { method: 'DELETE', headers: { ...auth(), 'x-request-id': 'partner-trace-42' } })
    await fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"x"}' })
    type Entry = { requestId: string; operation: string | null; path: string; response: { status: number } }
    const all = (await jsonOf(await fetch('/__sandbox/requests', { headers: auth() }))) as Entry[]
    expect(all.map((entry) => [entry.path, entry.response.status, entry.operation])).toEqual([
      ['/v1/categorie', 404, null],
      ['/v1/categories', 405, null],
      ['/v1/categories', 201, 'createCategory'],
    ])
    expect(all[0]!.requestId).toBe(wrongPath.headers.get('x-request-id'))
    expect(all[1]!.requestId).toBe('partner-trace-42')
    expect(wrongMethod.headers.get('x-request-id')).toBe('partner-trace-42')
    const notFound = (await jsonOf(await fetch('/__sandbox/requests?status=404', { headers: auth() }))) as Entry[]
    expect(notFound.map((entry) => entry.path)).toEqual(['/v1/categorie'])
    const creates = (await jsonOf(await fetch('/__sandbox/requests?operation=createCategory', { headers: auth() }))) as Entry[]
    expect(creates.map((entry) => entry.response.status)).toEqual([201])
    expectErrorBody(await jsonOf(await fetch('/__sandbox/requests?status=abc', { headers: auth() })), 400, 'invalid_query')
  })

  it.each([
    { query: 'path=categories', name: 'path', reason: /full URL path of an operation, base path included: \/v1\/categories, .*got "categories"$/ },
    { query: 'path=/categories', name: 'path', reason: /got "\/categories"$/ },
    { query: 'operation=nope', name: 'operation', reason: /^an operation name: listCategories, createCategory, getPetById, listOrders, got "nope"$/ },
    { query: 'method=FOO', name: 'method', reason: /^an HTTP method: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got "FOO"$/ },
    { query: 'verb=POST', name: 'verb', reason: /^a filter field: method, path, operation, status$/ },
    { query: 'status=700', name: 'status', reason: /^an HTTP status \(100-599\), or 0 for a dropped connection, got 700$/ },
    { query: 'method=GET&method=POST', name: 'method', reason: /^one value$/ },
    // Before: 200 and the whole journal (the name set the filter's prototype, no field; attack73 F2).
    { query: '__proto__=x', name: '__proto__', reason: /^a filter field: method, path, operation, status$/ },
  ])('answers 400 invalid_query for a journal filter that cannot match (issue 21 point 7): ?$query', async ({ query, name, reason }) => {
    const { fetch } = await startSandbox()
    await fetch('/v1/categories', { headers: auth() })
    const body = (await jsonOf(await fetch(`/__sandbox/requests?${query}`, { headers: auth() }))) as { message: string }
    expectErrorBody(body, 400, 'invalid_query')
    const [, named, expected] = /^Invalid query parameter (\S+): expected (.*)$/.exec(body.message) ?? []
    expect(named).toBe(name)
    expect(expected).toMatch(reason)
  })

  it('journals a header named __proto__ as every other header sent, on the server too (attack73 F2)', async () => {
    const { origin, fetch } = await startSandbox()
    // Raw: an HTTP client may drop the name itself.
    const answer = await exchange(origin, [`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${DEV_API_KEY}\r\n__proto__: header-value\r\nConnection: close\r\n\r\n`])
    expect(answer.status).toBe(200)
    const [entry] = (await jsonOf(await fetch('/__sandbox/requests', { headers: auth() }))) as { request: { headers: Record<string, string> } }[]
    // Before: left out (Node's parsed headers cannot hold the name).
    expect(Object.hasOwn(entry!.request.headers, '__proto__')).toBe(true)
    expect(entry!.request.headers['__proto__']).toBe('header-value')
  })

  it('filters the journal by a path with an id and by a prefix, as the library does', async () => {
    const { fetch } = await startSandbox()
    await fetch('/v1/pets/1', { headers: auth() })
    await fetch('/v1/categories', { headers: auth() })
    const paths = async (query: string) => ((await jsonOf(await fetch(`/__sandbox/requests?${query}`, { headers: auth() }))) as { path: string }[]).map((entry) => entry.path)
    expect(await paths('path=/v1/pets/1')).toEqual(['/v1/pets/1'])
    expect(await paths('path=/v1/cat*&method=get&status=200')).toEqual(['/v1/categories'])
    expect(await paths('path=/v1/store/orders')).toEqual([])
  })

  it('dumps the caller’s state', async () => {
    const { fetch } = await startSandbox()
    await fetch('/v1/categories', { headers: auth() })
    const state = (await jsonOf(await fetch('/__sandbox/state', { headers: auth() }))) as Record<string, unknown>
    expect(Object.keys(state).sort()).toEqual(['categories', 'journalSize', 'orders', 'pets', 'scenario', 'tenant'])
    expect(state['tenant']).toBe(tenantId('sandbox-dev-key'))
    expect(state['categories']).toHaveLength(5)
    expect(state['pets']).toHaveLength(4)
    expect(state['orders']).toHaveLength(2)
    expect(state['journalSize']).toBe(1)
  })

  it('lets the admin token act on a tenant named by ?tenant=', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'], adminToken: ADMIN })
    const k2 = tenantId('k2')
    const switched = await fetch(`/__sandbox/scenario?tenant=${k2}`, { method: 'PUT', headers: auth(ADMIN, true), body: '{"name":"empty"}' })
    expect(switched.status).toBe(200)
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth('k2') }))).toEqual([])
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth('k1') }))).toHaveLength(5)
    const state = (await jsonOf(await fetch(`/__sandbox/state?tenant=${k2}`, { headers: auth(ADMIN) }))) as { tenant: string }
    expect(state.tenant).toBe(k2)
    const journal = (await jsonOf(await fetch(`/__sandbox/requests?tenant=${k2}`, { headers: auth(ADMIN) }))) as unknown[]
    expect(journal).toHaveLength(1)
    expect((await fetch(`/__sandbox/reset?tenant=${k2}`, { method: 'POST', headers: auth(ADMIN) })).status).toBe(200)
    expect((await fetch(`/__sandbox/requests?tenant=${k2}`, { method: 'DELETE', headers: auth(ADMIN) })).status).toBe(204)
    const scenarios = (await jsonOf(await fetch(`/__sandbox/scenarios?tenant=${k2}`, { headers: auth(ADMIN) }))) as { name: string; active: boolean }[]
    expect(scenarios.find((scenario) => scenario.active)?.name).toBe('empty')
  })

  it('lists tenant ids for the admin token only', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'], adminToken: ADMIN })
    const response = await fetch('/__sandbox/tenants', { headers: auth(ADMIN) })
    expect(response.status).toBe(200)
    const tenants = (await jsonOf(response)) as { id: string; scenario: string }[]
    expect(tenants.map((tenant) => tenant.id).sort()).toEqual([tenantId('k1'), tenantId('k2')].sort())
    expectErrorBody(await jsonOf(await fetch('/__sandbox/tenants', { headers: auth('k1') })), 403, 'forbidden')
  })

  it('answers 400 tenant_required when the admin token names no tenant', async () => {
    const { fetch } = await startSandbox({ adminToken: ADMIN })
    expectErrorBody(await jsonOf(await fetch('/__sandbox/state', { headers: auth(ADMIN) })), 400, 'tenant_required')
  })

  it('answers 404 unknown_tenant when ?tenant= names no tenant', async () => {
    const { fetch } = await startSandbox({ adminToken: ADMIN })
    expectErrorBody(await jsonOf(await fetch('/__sandbox/state?tenant=000000000000', { headers: auth(ADMIN) })), 404, 'unknown_tenant')
  })

  it('says a prefix needs 12 hex digits when ?tenant= is shorter (a new user tried 4)', async () => {
    const { fetch } = await startSandbox({ adminToken: ADMIN, apiKeys: ['k1'] })
    const short = tenantId('k1').slice(0, 4)
    const body = await jsonOf(await fetch(`/__sandbox/state?tenant=${short}`, { headers: auth(ADMIN) }))
    expectErrorBody(body, 404, 'unknown_tenant')
    expect((body as { message: string }).message).toContain('unique prefix of 12 or more hex digits')
  })

  it('answers 403 forbidden when an API key names another tenant', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'] })
    const response = await fetch(`/__sandbox/state?tenant=${tenantId('k2')}`, { headers: auth('k1') })
    expectErrorBody(await jsonOf(response), 403, 'forbidden')
    expect((await fetch(`/__sandbox/state?tenant=${tenantId('k1')}`, { headers: auth('k1') })).status).toBe(200)
  })

  it.each([
    { method: 'POST', path: '/__sandbox/health', allow: 'GET' },
    { method: 'GET', path: '/__sandbox/scenario', allow: 'PUT' },
    { method: 'GET', path: '/__sandbox/reset', allow: 'POST' },
    { method: 'PUT', path: '/__sandbox/requests', allow: 'GET, DELETE' },
    { method: 'DELETE', path: '/__sandbox/state', allow: 'GET' },
  ])('answers 405 with Allow for $method $path', async ({ method, path, allow }) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, { method, headers: auth() })
    expect(response.headers.get('allow')).toBe(allow)
    expectErrorBody(await jsonOf(response), 405, 'method_not_allowed')
  })

  it('serves the demo page at /__sandbox/ when a demo directory exists', async () => {
    const demoDir = await tempScenariosDir({})
    await writeFile(join(demoDir, 'index.html'), '<!doctype html><title>demo</title>')
    const { fetch } = await startSandbox({ demoDir })
    const response = await fetch('/__sandbox/')
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/html/)
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    expectErrorBody(await jsonOf(await fetch('/__sandbox/missing.js')), 404, 'not_found')
  })

  it('leads /__sandbox without the slash to the demo page, query kept', async () => {
    const demoDir = await tempScenariosDir({})
    await writeFile(join(demoDir, 'index.html'), '<!doctype html><title>demo</title>')
    const { fetch } = await startSandbox({ demoDir })
    const response = await fetch('/__sandbox?key=1', { redirect: 'manual' })
    expect(response.status).toBe(308)
    expect(response.headers.get('location')).toBe('/__sandbox/?key=1')
    expect((await fetch('/__sandbox')).status).toBe(200)
  })

  it('answers 404 at /__sandbox/ without a demo directory', async () => {
    const { fetch } = await startSandbox()
    expectErrorBody(await jsonOf(await fetch('/__sandbox/')), 404, 'not_found')
  })
})

/** The request headers an answer says it varies on, lower-cased, sorted. */
function varied(response: Response): string[] {
  const vary = response.headers.get('vary')
  return vary === null ? [] : vary.split(',').map((name) => name.trim().toLowerCase()).sort()
}

/** A GET with the `Host` header given (fetch does not let a caller set it). */
function getWithHost(port: number, path: string, host: string): Promise<{ body: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, path, headers: { host } }, (response) => {
      let body = ''
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolve({ body, headers: response.headers }))
    })
    request.on('error', reject).end()
  })
}

interface OperationObject {
  parameters?: { name: string; example?: unknown }[]
  requestBody?: { content: Record<string, { example?: unknown } | undefined> }
  responses: Record<string, unknown>
}

interface ServedDocument {
  servers: { url: string }[]
  components: { schemas: Record<string, (Record<string, unknown> & { properties?: Record<string, unknown> }) | undefined> }
}
