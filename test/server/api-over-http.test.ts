/**
 * The core's matrix through the real server: the bridge must hand every request to the core and
 * every answer back unchanged, Error bodies included.
 */
import { describe, expect, it } from 'vitest'
import { DEV_API_KEY } from '../../src/server.js'
import { expectErrorBody, expectOperationResponse } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox, useStore } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'

const MIB = 1024 * 1024

describe.each(STORES)('API over HTTP ($name store)', (kind) => {
  useStore(kind)

  it('lists the default scenario categories with the development key', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { headers: auth() })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    const body = await jsonOf(response)
    expectOperationResponse('GET', '/categories', 200, body)
    expect(body).toHaveLength(5)
  })

  it('answers a path outside the API and admin API 404 with where they are, and one inside them without (trial38)', async () => {
    const sandbox = await startSandbox()
    const root = await sandbox.fetch('/')
    const body = (await jsonOf(root)) as { message: string }
    expectErrorBody(body, 404, 'not_found')
    // Before: "Path / not found".
    expect(body.message).toBe('Path / not found (the API is under /v1/, the admin API and demo page under /__sandbox/)')
    expect(((await jsonOf(await sandbox.fetch('/v1/nope', { headers: auth(DEV_API_KEY) }))) as { message: string }).message).toBe('Path /v1/nope not found')
  })

  it('sends a Content-Length, not a chunked body', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { headers: auth() })
    const bytes = (await response.arrayBuffer()).byteLength
    expect(response.headers.get('transfer-encoding')).toBeNull()
    expect(Number(response.headers.get('content-length'))).toBe(bytes)
  })

  it('creates a category and lists it after the seeded ones', async () => {
    const { fetch } = await startSandbox()
    const created = await fetch('/v1/categories', {
      method: 'POST',
      headers: auth(DEV_API_KEY, true),
      body: JSON.stringify({ name: 'Ferrets', description: 'Curious' }),
    })
    expect(created.status).toBe(201)
    const category = await jsonOf(created)
    expectOperationResponse('POST', '/categories', 201, category)
    expect(category).toEqual({ id: 6, name: 'Ferrets', description: 'Curious' })
    const list = (await jsonOf(await fetch('/v1/categories', { headers: auth() }))) as unknown[]
    expect(list.at(-1)).toEqual(category)
  })

  it.each([
    { name: 'missing name', body: '{}', code: 'missing_field' },
    { name: 'name is a number', body: '{"name":42}', code: 'invalid_field' },
    { name: 'name is blank', body: '{"name":"  "}', code: 'invalid_field' },
    { name: 'description is a number', body: '{"name":"x","description":1}', code: 'invalid_field' },
    { name: 'body is an array', body: '[{"name":"x"}]', code: 'invalid_body' },
    { name: 'body is empty', body: '', code: 'invalid_body' },
    { name: 'body is malformed JSON', body: '{"name":', code: 'invalid_json' },
    { name: 'content type is text/plain', body: '{"name":"x"}', code: 'unsupported_media_type', contentType: 'text/plain' },
  ])('answers 400 $code when the $name', async ({ body, code, contentType }) => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', {
      method: 'POST',
      headers: { ...auth(), 'content-type': contentType ?? 'application/json' },
      body,
    })
    expect(response.status).toBe(400)
    const error = await jsonOf(response)
    expectOperationResponse('POST', '/categories', 400, error)
    expectErrorBody(error, 400, code)
  })

  it.each([
    { name: 'a name with a lone high surrogate', body: String.raw`{"name":"a\ud800b"}`, field: 'name' },
    { name: 'a name of 200 lone surrogates', body: `{"name":"${String.raw`\ud800`.repeat(200)}"}`, field: 'name' },
    { name: 'a name with a pair in the wrong order', body: String.raw`{"name":"\udc00\ud800"}`, field: 'name' },
    { name: 'a description with a lone low surrogate', body: String.raw`{"name":"x","description":"\udc00"}`, field: 'description' },
  ])('answers 400 invalid_field naming the field for $name, and stores nothing (issue 20 F08)', async ({ body, field }) => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { method: 'POST', headers: auth(DEV_API_KEY, true), body })
    expect(response.status).toBe(400)
    const error = await jsonOf(response)
    expectOperationResponse('POST', '/categories', 400, error)
    expectErrorBody(error, 400, 'invalid_field')
    expect((error as { message: string }).message).toBe(`${field} must be well-formed Unicode text (it holds an unpaired UTF-16 surrogate)`)
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth() }))).toHaveLength(5)
  })

  it('stores names of 200 characters counted as code points (an emoji is one) exactly as sent, and refuses 201 (issue 20 F08)', async () => {
    const { fetch } = await startSandbox()
    const create = (name: string, description?: string) =>
      fetch('/v1/categories', { method: 'POST', headers: auth(DEV_API_KEY, true), body: JSON.stringify({ name, description }) })
    const name = '\u{1F408}'.repeat(199) + 'é'
    const description = 'a\u{1F431}b'
    const created = await create(name, description)
    expect(created.status).toBe(201)
    expect(await jsonOf(created)).toEqual({ id: 6, name, description })
    const listed = (await jsonOf(await fetch('/v1/categories', { headers: auth() }))) as unknown[]
    expect(listed.at(-1)).toEqual({ id: 6, name, description })
    const tooLong = await create('\u{1F408}'.repeat(201))
    expectErrorBody(await jsonOf(tooLong), 400, 'invalid_field')
  })

  it('answers 400 invalid_json when the body is not UTF-8', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', {
      method: 'POST',
      headers: auth(DEV_API_KEY, true),
      body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]),
    })
    expectErrorBody(await jsonOf(response), 400, 'invalid_json')
  })

  it.each<{ name: string; headers: Record<string, string>; code: string }>([
    { name: 'no Authorization header', headers: {}, code: 'missing_api_key' },
    { name: 'a Basic scheme', headers: { authorization: 'Basic abc' }, code: 'invalid_api_key' },
    { name: 'an unknown key', headers: { authorization: 'Bearer not-a-key' }, code: 'invalid_api_key' },
  ])('answers 401 $code with $name', async ({ headers, code }) => {
    const { fetch } = await startSandbox()
    for (const [method, body] of [['GET', undefined], ['POST', '{"name":']] as const) {
      const response = await fetch('/v1/categories', { method, headers: { ...headers, 'content-type': 'application/json' }, body })
      expect(response.status).toBe(401)
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/)
      const error = await jsonOf(response)
      expectOperationResponse(method, '/categories', 401, error)
      expectErrorBody(error, 401, code)
    }
  })

  it.each([
    { method: 'DELETE', path: '/v1/categories', allow: 'GET, HEAD, POST' },
    { method: 'PUT', path: '/v1/pets/1', allow: 'GET, HEAD' },
    { method: 'POST', path: '/v1/store/orders', allow: 'GET, HEAD' },
  ])('answers 405 with Allow for $method $path', async ({ method, path, allow }) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, { method, headers: auth() })
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toBe(allow)
    expectErrorBody(await jsonOf(response), 405, 'method_not_allowed')
  })

  it('answers HEAD with the Content-Length and headers of its GET, and no body', async () => {
    const { fetch } = await startSandbox()
    const get = await fetch('/v1/pets/1', { headers: auth() })
    const head = await fetch('/v1/pets/1', { method: 'HEAD', headers: auth() })
    expect(head.status).toBe(200)
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(await get.text())))
    expect(head.headers.get('deprecation')).toBe(get.headers.get('deprecation'))
    expect(await head.text()).toBe('')
  })

  it.each(['/v1/Categories', '/v1/categories/', '/V1/categories', '/v1/store/Orders'])(
    'answers 404 for %s, as the real service would: paths match case and all, without a trailing slash',
    async (path) => {
      const { fetch } = await startSandbox()
      const response = await fetch(path, { headers: auth() })
      expect(response.status).toBe(404)
      expectErrorBody(await jsonOf(response), 404, 'not_found')
    },
  )

  it.each(['/v1/nope', '/v1', '/nope', '/', '/__sandbox/nope', '/v2/categories'])('answers 404 Error JSON for %s', async (path) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, { headers: auth() })
    expect(response.status).toBe(404)
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    expectErrorBody(await jsonOf(response), 404, 'not_found')
  })

  it('answers 413 with our Error body for a declared body over 1 MiB, then serves the next request', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', {
      method: 'POST',
      headers: auth(DEV_API_KEY, true),
      body: `{"name":"${'x'.repeat(MIB)}"}`,
    })
    expect(response.status).toBe(413)
    const error = await jsonOf(response)
    expectOperationResponse('POST', '/categories', 413, error)
    expectErrorBody(error, 413, 'payload_too_large')
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
  })

  it('answers 413 for a chunked body that grows over 1 MiB, then serves the next request', async () => {
    const { fetch } = await startSandbox()
    const chunk = new Uint8Array(64 * 1024).fill(0x20)
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 24; i++) controller.enqueue(chunk)
        controller.close()
      },
    })
    const response = await fetch('/v1/categories', { method: 'POST', headers: auth(DEV_API_KEY, true), body, duplex: 'half' } as RequestInit)
    expectErrorBody(await jsonOf(response), 413, 'payload_too_large')
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
  })

  it('serves a pet with its deprecation headers and 404 for an unknown pet', async () => {
    const { fetch } = await startSandbox()
    const pet = await fetch('/v1/pets/1', { headers: auth() })
    expect(pet.status).toBe(200)
    expect(pet.headers.get('deprecation')).toBe('@1767225600')
    expect(pet.headers.get('sunset')).toBe('Wed, 30 Jun 2027 00:00:00 GMT')
    expectOperationResponse('GET', '/pets/{petId}', 200, await jsonOf(pet))
    const missing = await fetch('/v1/pets/999', { headers: auth() })
    expectOperationResponse('GET', '/pets/{petId}', 404, await jsonOf(missing))
  })

  it('lists the orders of the scenario', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/store/orders', { headers: auth() })
    expect(response.status).toBe(200)
    expectOperationResponse('GET', '/store/orders', 200, await jsonOf(response))
  })

  it('answers the status a Prefer header forces', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { headers: { ...auth(), prefer: 'code=503' } })
    expect(response.status).toBe(503)
    expectOperationResponse('GET', '/categories', 503, await jsonOf(response))
  })

  it('answers 410 on the pet operation in the after-sunset scenario', async () => {
    const { fetch } = await startSandbox({ scenario: 'after-sunset' })
    const response = await fetch('/v1/pets/1', { headers: auth() })
    expectOperationResponse('GET', '/pets/{petId}', 410, await jsonOf(response))
  })

  it('drops the connection on a simulated network failure and keeps serving (regression: status 0 crashed the process)', async () => {
    const { fetch } = await startSandbox({
      scenario: { name: 'cut', version: '1.0.0', description: 'Every request fails', faults: { rate: 1, outcomes: ['network'] } },
    })
    await expect(fetch('/v1/categories', { headers: auth() })).rejects.toThrow()
    const health = await fetch('/__sandbox/health')
    expect(health.status).toBe(200)
  })

  it('applies --latency to every answer through the server', async () => {
    const { fetch, sandbox } = await startSandbox({ latency: 1 })
    expect((await sandbox.tenants.resolve(DEV_API_KEY))?.faults.settings.latency).toBe(1)
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
  })

  it('refuses unknown fields with strict: true, as the library does', async () => {
    const { fetch } = await startSandbox({ strict: true })
    const response = await fetch('/v1/categories', { method: 'POST', headers: auth(DEV_API_KEY, true), body: '{"name":"x","colour":"red"}' })
    const body = await jsonOf(response)
    expectOperationResponse('POST', '/categories', response.status, body)
    expect(body).toMatchObject({ code: 'unknown_field', status: 400 })
  })
})
