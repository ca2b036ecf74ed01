/**
 * `sandbox.app`, the express app for mounting in an app of one's own, answers as `listener` does:
 * the same API, headers, Error bodies and admin routes.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createSandboxApp, DEV_API_KEY } from '../../src/server.js'
import { expectErrorBody, expectOperationResponse } from '../support/openapi-validator.js'
import { auth, jsonOf } from '../support/sandbox-server.js'

/** A user's own express app with the sandbox mounted in it, on 127.0.0.1 port 0. */
async function startMounted(): Promise<(path: string, init?: RequestInit) => Promise<Response>> {
  const { app } = await createSandboxApp({ demoDir: false })
  const parent = express()
  parent.get('/own-route', (_req, res) => {
    res.json({ mine: true })
  })
  parent.use(app)
  const server = createServer(parent)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return (path, init) => fetch(`${origin}${path}`, init)
}

describe('sandbox.app mounted in an express app', () => {
  it('lists and creates categories, with the headers every answer carries', async () => {
    const call = await startMounted()
    const created = await call('/v1/categories', {
      method: 'POST',
      headers: auth(DEV_API_KEY, true),
      body: JSON.stringify({ name: 'Ferrets' }),
    })
    expect(created.status).toBe(201)
    expect(created.headers.get('x-content-type-options')).toBe('nosniff')
    expect(created.headers.get('x-request-id')).toMatch(/\S/)
    const category = await jsonOf(created)
    expectOperationResponse('POST', '/categories', 201, category)
    expect(category).toEqual({ id: 6, name: 'Ferrets' })
    const list = await jsonOf(await call('/v1/categories', { headers: auth() }))
    expectOperationResponse('GET', '/categories', 200, list)
    expect(list).toHaveLength(6)
  })

  it('answers the Error bodies of the core: 401, 400 for bad JSON, 404, 405', async () => {
    const call = await startMounted()
    const missing = await call('/v1/categories')
    expect(missing.status).toBe(401)
    expect(missing.headers.get('www-authenticate')).toBe('Bearer')
    expectErrorBody(await jsonOf(missing), 401, 'missing_api_key')

    const badJson = await call('/v1/categories', { method: 'POST', headers: auth(DEV_API_KEY, true), body: '{"name":' })
    expect(badJson.status).toBe(400)
    expectErrorBody(await jsonOf(badJson), 400, 'invalid_json')

    const unknown = await call('/v1/nope', { headers: auth() })
    expect(unknown.status).toBe(404)
    expectErrorBody(await jsonOf(unknown), 404, 'not_found')

    const wrongMethod = await call('/v1/categories', { method: 'DELETE', headers: auth() })
    expect(wrongMethod.status).toBe(405)
    expect(wrongMethod.headers.get('allow')).toBe('GET, HEAD, POST')
  })

  it('serves the admin API and CORS preflights, and leaves the parent app its own routes', async () => {
    const call = await startMounted()
    const health = await call('/__sandbox/health')
    expect(health.status).toBe(200)
    expect(await jsonOf(health)).toMatchObject({ status: 'ok' })
    const state = (await jsonOf(await call('/__sandbox/state', { headers: auth() }))) as { scenario: { name: string }; categories: unknown[] }
    expect(state.scenario.name).toBe('default')
    expect(state.categories).toHaveLength(5)
    const preflight = await call('/v1/categories', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example.test', 'access-control-request-method': 'POST' },
    })
    expect(preflight.status).toBe(204)
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*')
    expect(await jsonOf(await call('/own-route'))).toEqual({ mine: true })
  })
})
