import { describe, expect, it } from 'vitest'
import type { ApiError } from '../src/index.js'
import { constantTimeEqual, KeyRing } from '../src/core/auth.js'
import { call, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()

const operations = [
  { name: 'listCategories', path: '/categories', method: 'GET' },
  { name: 'createCategory', path: '/categories', method: 'POST', body: '{"name":"x"}' },
  { name: 'getPetById', path: '/pets/1', method: 'GET' },
  { name: 'listOrders', path: '/store/orders', method: 'GET' },
]

const headers: { name: string; auth: string | null; code: string; challenge: string }[] = [
  { name: 'no Authorization header', auth: null, code: 'missing_api_key', challenge: 'Bearer' },
  { name: 'an empty header', auth: '', code: 'missing_api_key', challenge: 'Bearer' },
  { name: 'the Basic scheme', auth: 'Basic dDBrZW46', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
  { name: 'Bearer without a token', auth: 'Bearer', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
  { name: 'a bare token', auth: 't0ken', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
  { name: 'an unknown key', auth: 'Bearer wrong', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
  { name: 'a key with an extra character', auth: 'Bearer t0ken1', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
  { name: 'a prefix of the key', auth: 'Bearer t0ke', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
  { name: 'two tokens', auth: 'Bearer t0ken t0ken', code: 'invalid_api_key', challenge: 'Bearer error="invalid_token"' },
]

describe.each(operations)('$name', ({ path, method, body }) => {
  it.each(headers)('answers 401 $code for $name, with WWW-Authenticate', async ({ auth, code, challenge }) => {
    const petstore = await harness.use()
    const answer = await call<ApiError>(path, { method, auth, ...(body && { body }) })
    expect(answer.status).toBe(401)
    expect(answer.body.code).toBe(code)
    expect(answer.headers.get('www-authenticate')).toBe(challenge)
    expect(await petstore.categories.list()).toHaveLength(5)
  })
})

describe('authentication', () => {
  it('accepts the scheme in any case', async () => {
    await harness.use()
    expect((await call('/categories', { auth: 'bearer t0ken' })).status).toBe(200)
    expect((await call('/categories', { auth: 'BEARER t0ken' })).status).toBe(200)
  })

  it('answers 401 before judging an invalid body', async () => {
    await harness.use()
    const answer = await call<ApiError>('/categories', { method: 'POST', body: 'not json', auth: 'Bearer nope' })
    expect(answer.status).toBe(401)
  })

  it('answers 401 before a body over the limit', async () => {
    await harness.use({ maxBodyBytes: 10 })
    const answer = await call<ApiError>('/categories', { body: { name: 'a long enough name' }, auth: null })
    expect(answer.body.code).toBe('missing_api_key')
  })

  it("accepts any non-empty key with apiKeys 'any'", async () => {
    await harness.use({ apiKeys: 'any' })
    expect((await call('/categories', { auth: 'Bearer whatever' })).status).toBe(200)
    expect((await call('/categories', { auth: null })).status).toBe(401)
  })

  it('accepts every key of the list', async () => {
    await harness.use({ apiKeys: ['k1', 'k2'] })
    expect((await call('/categories', { auth: 'Bearer k1' })).status).toBe(200)
    expect((await call('/categories', { auth: 'Bearer k2' })).status).toBe(200)
    expect((await call('/categories', { auth: 'Bearer t0ken' })).status).toBe(401)
  })

  it('never puts the key in an error message', async () => {
    await harness.use()
    const answer = await call<ApiError>('/categories', { auth: 'Bearer s3cret-guess' })
    expect(JSON.stringify(answer.body)).not.toContain('s3cret-guess')
  })
})

describe('KeyRing', () => {
  it('compares whole keys, whatever their length', () => {
    const ring = new KeyRing(['abc', 'longer-key'])
    expect(['abc', 'longer-key', 'ab', 'abcd', 'longer-kex', ''].map((token) => ring.accepts(token))).toEqual([
      true,
      true,
      false,
      false,
      false,
      false,
    ])
  })

  it('constantTimeEqual tells equal from different byte strings', () => {
    const bytes = (text: string) => new TextEncoder().encode(text)
    expect(constantTimeEqual(bytes('same'), bytes('same'))).toBe(1)
    expect(constantTimeEqual(bytes('same'), bytes('sane'))).toBe(0)
    expect(constantTimeEqual(bytes('same'), bytes('same!'))).toBe(0)
  })
})
