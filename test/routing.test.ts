import { getResponse } from 'msw'
import { describe, expect, it } from 'vitest'
import type { ApiError, Category } from '../src/index.js'
import { BASE, call, KEY, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('routing', () => {
  it.each([
    { method: 'PUT', path: '/categories', allow: 'GET, HEAD, POST' },
    { method: 'DELETE', path: '/categories', allow: 'GET, HEAD, POST' },
    { method: 'PATCH', path: '/categories', allow: 'GET, HEAD, POST' },
    { method: 'POST', path: '/pets/1', allow: 'GET, HEAD' },
    { method: 'DELETE', path: '/store/orders', allow: 'GET, HEAD' },
  ])('answers 405 with Allow: $allow for $method $path', async ({ method, path, allow }) => {
    await harness.use()
    const answer = await call<ApiError>(path, { method })
    expect(answer.status).toBe(405)
    expect(answer.headers.get('allow')).toBe(allow)
    expect(answer.body.code).toBe('method_not_allowed')
    expect(answer.body.message).toBe(`Method ${method} is not allowed on /v1${path}; allowed: ${allow}`)
  })

  it.each(['/nope', '/categories/1', '/pets', '/store', '/store/orders/1'])('answers 404 not_found for %s', async (path) => {
    await harness.use()
    const answer = await call<ApiError>(path)
    expect(answer.status).toBe(404)
    expect(answer.body).toEqual({ code: 'not_found', message: `Path /v1${path} not found`, status: 404 })
  })

  it.each(['/Categories', '/CATEGORIES', '/categories/', '/store/orders/', '/Pets/1', '/pets/1/', '/Store/orders'])(
    'answers 404 for %s: paths match as the interface writes them, case and trailing slash included',
    async (path) => {
      await harness.use()
      const answer = await call<ApiError>(path)
      expect(answer.status).toBe(404)
      expect(answer.body).toEqual({ code: 'not_found', message: `Path /v1${path} not found`, status: 404 })
    },
  )

  it.each(['/categories', '/pets/1', '/store/orders'])('answers HEAD %s with the headers of its GET and no body', async (path) => {
    const petstore = await harness.use()
    const get = await call(path)
    const head = await call(path, { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(head.body).toBeUndefined()
    expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'))
    expect(head.headers.get('deprecation')).toBe(get.headers.get('deprecation'))
    const entry = petstore.requests.all({ method: 'HEAD' })[0]
    expect(entry).toMatchObject({ method: 'HEAD', response: { status: 200, body: undefined } })
  })

  it('answers HEAD without a key with 401, as GET does', async () => {
    await harness.use()
    const head = await call('/categories', { method: 'HEAD', auth: null })
    expect(head.status).toBe(401)
    expect(head.headers.get('www-authenticate')).toBe('Bearer')
  })

  it('serves several base URLs from one store (production and staging)', async () => {
    const staging = 'https://staging.shop.test/v1'
    await harness.use({ baseUrl: [BASE, staging] })
    await call('/categories', { body: { name: 'Ferrets' }, base: staging })
    const listed = await call<Category[]>('/categories')
    expect(listed.body.at(-1)?.name).toBe('Ferrets')
  })

  it('answers 404 not_found for the base URL itself', async () => {
    await harness.use()
    const answer = await call<ApiError>('')
    expect(answer.status).toBe(404)
    expect(answer.body).toEqual({ code: 'not_found', message: 'Path /v1 not found', status: 404 })
  })

  it("leaves paths that only contain /v1/ to other handlers with the default base URL '*/v1'", async () => {
    const petstore = await harness.use({ baseUrl: undefined })
    for (const url of ['https://cdn.test/static/v1/app.js', 'https://api.test/v2/v1/categories']) {
      expect(await getResponse(petstore.handlers, new Request(url, { headers: { authorization: `Bearer ${KEY}` } }))).toBeUndefined()
    }
    const nested = await getResponse(petstore.handlers, new Request('https://api.test/v1/categories/v1/categories', { headers: { authorization: `Bearer ${KEY}` } }))
    expect(nested?.status).toBe(404)
  })

  it("matches any origin with the default base URL '*/v1'", async () => {
    await harness.use({ baseUrl: undefined })
    for (const origin of ['http://localhost:3000', 'https://api.example.test']) {
      expect((await call('/categories', { base: `${origin}/v1` })).status).toBe(200)
    }
  })
})

describe('getPetById (deprecated)', () => {
  it('answers the scenario pet with Deprecation and Sunset headers', async () => {
    await harness.use()
    const answer = await call<{ id: number; name: string }>('/pets/1')
    expect(answer.status).toBe(200)
    expect(answer.body).toMatchObject({ id: 1, name: 'Rex' })
    expect(answer.headers.get('deprecation')).toBe('@1767225600')
    expect(answer.headers.get('sunset')).toBe('Wed, 30 Jun 2027 00:00:00 GMT')
  })

  it.each(['99', 'abc', '1.5', '-1', '0'])('answers 404 for pet id %s', async (id) => {
    await harness.use()
    const answer = await call<ApiError>(`/pets/${id}`)
    expect(answer.status).toBe(404)
    expect(answer.body.message).toBe(`Pet "${id}" not found`)
    expect(answer.headers.get('deprecation')).toBe('@1767225600')
  })

  it('answers 410 gone after the sunset', async () => {
    await harness.use({ scenario: 'after-sunset' })
    const answer = await call<ApiError>('/pets/1')
    expect(answer.status).toBe(410)
    expect(answer.body).toEqual({
      code: 'gone',
      message: 'GET /pets/{petId} was sunset on 2026-06-30T00:00:00Z',
      status: 410,
    })
    expect(answer.headers.get('sunset')).toBe('Tue, 30 Jun 2026 00:00:00 GMT')
  })

  it('says when it was deprecated (RFC 9745) and links the pages a scenario names (RFC 8594)', async () => {
    const scenario = {
      name: 'documented',
      version: '1.0.0',
      description: 'deprecation with pages',
      seed: { pets: [{ id: 1, name: 'Rex' }] },
      deprecation: {
        deprecatedAt: '2025-03-01T12:00:00Z',
        link: 'https://docs.shop.test/deprecations/pets',
        sunset: '2027-06-30T00:00:00Z',
        sunsetLink: 'https://docs.shop.test/sunset?op=getPetById&x=<b>',
      },
    }
    await harness.use({ scenario })
    const answer = await call('/pets/1')
    expect(answer.headers.get('deprecation')).toBe(`@${Date.UTC(2025, 2, 1, 12) / 1000}`)
    expect(answer.headers.get('link')).toBe(
      '<https://docs.shop.test/deprecations/pets>; rel="deprecation"; type="text/html", ' +
        '<https://docs.shop.test/sunset?op=getPetById&x=%3Cb%3E>; rel="sunset"; type="text/html"',
    )
  })

  it('refuses a deprecation link that is not an http(s) URL', async () => {
    const scenario = { name: 'bad-link', version: '1.0.0', description: 'x', deprecation: { link: 'javascript:alert(1)' } }
    await expect(harness.use({ scenario })).rejects.toThrow(/deprecation\.link: must be an absolute http\(s\) URL/)
  })

  it('turns on after-sunset with the option, on any scenario', async () => {
    await harness.use({ afterSunset: true })
    expect((await call('/pets/1')).status).toBe(410)
  })

  it('sends no Sunset header when the scenario has no sunset date', async () => {
    await harness.use({ scenario: 'empty' })
    const answer = await call('/pets/1')
    expect(answer.status).toBe(404)
    expect(answer.headers.get('sunset')).toBeNull()
  })
})

describe('listOrders', () => {
  it('answers the scenario orders', async () => {
    await harness.use()
    const answer = await call<{ id: number }[]>('/store/orders')
    expect(answer.status).toBe(200)
    expect(answer.body.map((order) => order.id)).toEqual([1, 2])
  })

  it('answers an empty array by default', async () => {
    await harness.use({ scenario: 'empty' })
    expect((await call('/store/orders')).body).toEqual([])
  })
})
