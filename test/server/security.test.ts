/**
 * Security across tenants: every route and admin route with two tenants, admin auth, keys kept
 * out of logs, journal, errors and the state dump, path-like scenario names, nosniff everywhere.
 */
import { describe, expect, it } from 'vitest'
import { auth, jsonOf, startSandbox, type RunningSandbox, useStore } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'

const A = 'key-a-7d1f0c'
const B = 'key-b-92ae4b'
const ADMIN = 'admin-token-51c3'
const MARK = 'only-in-tenant-a'

async function twoTenants(): Promise<RunningSandbox> {
  const sandbox = await startSandbox({ apiKeys: [A, B], adminToken: ADMIN })
  const created = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(A, true), body: JSON.stringify({ name: MARK }) })
  expect(created.status).toBe(201)
  return sandbox
}

const ROUTES: { name: string; method: string; path: string; body?: string }[] = [
  { name: 'GET /v1/categories', method: 'GET', path: '/v1/categories' },
  { name: 'POST /v1/categories', method: 'POST', path: '/v1/categories', body: '{"name":"from b"}' },
  { name: 'GET /v1/pets/1', method: 'GET', path: '/v1/pets/1' },
  { name: 'GET /v1/store/orders', method: 'GET', path: '/v1/store/orders' },
  { name: 'GET /__sandbox/state', method: 'GET', path: '/__sandbox/state' },
  { name: 'GET /__sandbox/requests', method: 'GET', path: '/__sandbox/requests' },
  { name: 'GET /__sandbox/scenarios', method: 'GET', path: '/__sandbox/scenarios' },
  { name: 'PUT /__sandbox/scenario', method: 'PUT', path: '/__sandbox/scenario', body: '{"name":"default"}' },
  { name: 'POST /__sandbox/reset', method: 'POST', path: '/__sandbox/reset' },
  { name: 'DELETE /__sandbox/requests', method: 'DELETE', path: '/__sandbox/requests' },
  { name: 'GET /__sandbox/tenants', method: 'GET', path: '/__sandbox/tenants' },
]

describe.each(STORES)('security across tenants ($name store)', (kind) => {
  useStore(kind)

  it.each(ROUTES)('$name with tenant B’s key never shows or changes tenant A’s data', async ({ method, path, body }) => {
    const sandbox = await twoTenants()
    const response = await sandbox.fetch(path, { method, headers: auth(B, body !== undefined), ...(body ? { body } : {}) })
    expect(response.status).toBeLessThan(500)
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    expect(await response.text()).not.toContain(MARK)
    const a = await sandbox.fetch('/v1/categories', { headers: auth(A) })
    expect(await a.text()).toContain(MARK)
  })

  it.each(ROUTES.filter((route) => route.path.startsWith('/__sandbox') || route.path.startsWith('/v1')))(
    '$name without a key answers 401 with nosniff',
    async ({ method, path, body }) => {
      const sandbox = await twoTenants()
      const response = await sandbox.fetch(path, { method, ...(body ? { body, headers: { 'content-type': 'application/json' } } : {}) })
      expect(response.status).toBe(401)
      expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    },
  )

  it.each(['../../etc/passwd', '/etc/passwd', '..%2F..%2Fetc%2Fpasswd', 'default/../../etc/passwd', 'C:\\Windows\\win.ini'])(
    'refuses the scenario name %j and keeps the data',
    async (name) => {
      const sandbox = await twoTenants()
      const response = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(A, true), body: JSON.stringify({ name }) })
      expect(response.status).toBe(404)
      expect(((await jsonOf(response)) as { code: string }).code).toBe('unknown_scenario')
      expect(await (await sandbox.fetch('/v1/categories', { headers: auth(A) })).text()).toContain(MARK)
    },
  )

  it('keeps every key out of the request log, the journal, error bodies and the state dump', async () => {
    const sandbox = await twoTenants()
    const seen: string[] = []
    const read = async (response: Response) => seen.push(await response.text())
    await read(await sandbox.fetch('/v1/categories', { headers: auth('wrong-key-3bd9') }))
    await read(await sandbox.fetch('/__sandbox/state', { headers: auth('wrong-key-3bd9') }))
    await read(await sandbox.fetch('/__sandbox/requests', { headers: auth(A) }))
    await read(await sandbox.fetch(`/__sandbox/state?tenant=x`, { headers: auth(A) }))
    await read(await sandbox.fetch('/__sandbox/tenants', { headers: auth(ADMIN) }))
    const tenants = JSON.parse(seen.at(-1)!) as { id: string }[]
    for (const { id } of tenants) {
      await read(await sandbox.fetch(`/__sandbox/state?tenant=${id}`, { headers: auth(ADMIN) }))
      await read(await sandbox.fetch(`/__sandbox/requests?tenant=${id}`, { headers: auth(ADMIN) }))
    }
    const everything = seen.join('\n') + JSON.stringify(sandbox.logs)
    for (const secret of [A, B, ADMIN, 'wrong-key-3bd9']) expect(everything).not.toContain(secret)
  })
})
