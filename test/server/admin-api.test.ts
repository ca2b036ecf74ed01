/** The admin API under /__sandbox/: every route with and without auth, and with the admin token. */
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tenantId } from '../../src/server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'

const ADMIN = 'admin-token-for-tests'

const TENANT_ROUTES = [
  { method: 'GET', path: '/__sandbox/scenarios' },
  { method: 'PUT', path: '/__sandbox/scenario', body: '{"name":"empty"}' },
  { method: 'POST', path: '/__sandbox/reset' },
  { method: 'GET', path: '/__sandbox/requests' },
  { method: 'DELETE', path: '/__sandbox/requests' },
  { method: 'GET', path: '/__sandbox/state' },
  { method: 'GET', path: '/__sandbox/tenants' },
]

async function tempScenariosDir(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-scenarios-'))
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), JSON.stringify(content))
  return dir
}

describe('admin API', () => {
  it('answers health without auth', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/__sandbox/health')
    expect(response.status).toBe(200)
    const body = (await jsonOf(response)) as Record<string, unknown>
    // The store the suite runs on (PETSTORE_TEST_STORE, memory by default) is the one reported.
    const kind = process.env['PETSTORE_TEST_STORE'] ?? 'memory'
    expect(body).toEqual({ status: 'ok', version: expect.stringMatching(/^\d+\.\d+\.\d+/), uptimeSeconds: expect.any(Number), storage: { kind, ok: true } })
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
    expect(Object.keys(scenarios[0]!).sort()).toEqual(['active', 'description', 'name', 'version'])
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

  it('answers 500 with the reason when a directory scenario is broken', async () => {
    const scenariosDir = await tempScenariosDir({ 'broken.json': { name: 'broken', version: 'x', description: 'bad' } })
    const { fetch } = await startSandbox({ scenariosDir })
    const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"broken"}' })
    const error = (await jsonOf(response)) as { message: string }
    expectErrorBody(error, 500, 'internal_error')
    expect(error.message).toContain('version')
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

  it('answers 404 at /__sandbox/ without a demo directory', async () => {
    const { fetch } = await startSandbox()
    expectErrorBody(await jsonOf(await fetch('/__sandbox/')), 404, 'not_found')
  })
})
