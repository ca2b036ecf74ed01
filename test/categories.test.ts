import { describe, expect, it } from 'vitest'
import type { ApiError, Category } from '../src/index.js'
import { BASE, call, petstoreHarness, readConformant } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('listCategories', () => {
  it('answers 200 with the seeded categories in creation order', async () => {
    await harness.use()
    const { status, body } = await call<Category[]>('/categories')
    expect(status).toBe(200)
    expect(body.map((category) => category.name)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
    expect(body[3]).toEqual({ id: 4, name: 'Birds' })
  })

  it('answers an empty array on the empty scenario', async () => {
    await harness.use({ scenario: 'empty' })
    expect((await call('/categories')).body).toEqual([])
  })
})

describe('createCategory', () => {
  it('answers 201 with name, description and the next id, and lists it last', async () => {
    await harness.use()
    const created = await call<Category>('/categories', { body: { name: 'Ferrets', description: 'Playful' } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ id: 6, name: 'Ferrets', description: 'Playful' })
    const listed = await call<Category[]>('/categories')
    expect(listed.body.at(-1)).toEqual(created.body)
  })

  it('omits description when none was sent', async () => {
    await harness.use()
    const created = await call<Category>('/categories', { body: { name: 'Ferrets' } })
    expect(created.body).toEqual({ id: 6, name: 'Ferrets' })
    expect(Object.keys(created.body)).toEqual(['id', 'name'])
  })

  it('starts ids at 1 on an empty store and counts up', async () => {
    await harness.use({ scenario: 'empty' })
    const ids = []
    for (const name of ['a', 'b', 'c']) ids.push((await call<Category>('/categories', { body: { name } })).body.id)
    expect(ids).toEqual([1, 2, 3])
  })

  it('ignores unknown fields and an id in the body, never storing or echoing them', async () => {
    const petstore = await harness.use()
    const created = await call<Category>('/categories', { body: { name: 'Ferrets', id: 99, color: 'brown' } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ id: 6, name: 'Ferrets' })
    expect((await petstore.categories.list()).at(-1)).toEqual({ id: 6, name: 'Ferrets' })
  })

  it('keeps the name exactly as sent, surrounding spaces and unicode included', async () => {
    await harness.use()
    const created = await call<Category>('/categories', { body: { name: '  Chats 🐈 ' } })
    expect(created.body.name).toBe('  Chats 🐈 ')
  })

  it.each([
    'application/json; charset=utf-8',
    'APPLICATION/JSON; charset=UTF-8',
    'application/vnd.petstore+json',
    'application/problem+json',
    'application/vnd.api+v2+json',
  ])('accepts the JSON content type %s', async (contentType) => {
    const petstore = await harness.use()
    expect((await call('/categories', { body: { name: 'A' }, contentType })).status).toBe(201)
    expect(await petstore.categories.list()).toHaveLength(6)
  })

  it('gives 200 concurrent creates 200 distinct increasing ids', async () => {
    const petstore = await harness.use({ scenario: 'empty' })
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, index) => call<Category>('/categories', { body: { name: `c${index}` } })),
    )
    const ids = answers.map((answer) => answer.body.id)
    expect(new Set(ids).size).toBe(200)
    expect((await petstore.categories.list()).map((category) => category.id)).toEqual(
      Array.from({ length: 200 }, (_, index) => index + 1),
    )
  })
})

describe('createCategory rejects invalid bodies with 400 and stores nothing', () => {
  const cases: { name: string; body?: string; contentType?: string | null; code: string; message: RegExp }[] = [
    { name: 'no body at all', code: 'invalid_body', message: /body is empty/ },
    { name: 'an empty body', body: '', code: 'invalid_body', message: /body is empty/ },
    { name: 'a whitespace body', body: '  \n', code: 'invalid_body', message: /body is empty/ },
    { name: 'malformed JSON', body: '{"name": "x"', code: 'invalid_json', message: /not valid JSON/ },
    { name: 'a JSON array', body: '[{"name":"x"}]', code: 'invalid_body', message: /got an array/ },
    { name: 'a JSON string', body: '"Dogs"', code: 'invalid_body', message: /got a string/ },
    { name: 'JSON null', body: 'null', code: 'invalid_body', message: /got null/ },
    { name: 'a JSON number', body: '42', code: 'invalid_body', message: /got a number/ },
    { name: 'name missing', body: '{"description":"x"}', code: 'missing_field', message: /^name is required$/ },
    { name: 'name a number', body: '{"name":42}', code: 'invalid_field', message: /^name must be a non-empty string$/ },
    { name: 'name null', body: '{"name":null}', code: 'invalid_field', message: /^name must be a non-empty string$/ },
    { name: 'name empty', body: '{"name":""}', code: 'invalid_field', message: /^name must be a non-empty string$/ },
    { name: 'name whitespace only', body: '{"name":" \\t "}', code: 'invalid_field', message: /^name must be a non-empty string$/ },
    { name: 'name an object', body: '{"name":{"en":"Dogs"}}', code: 'invalid_field', message: /name must be/ },
    { name: 'description a number', body: '{"name":"x","description":1}', code: 'invalid_field', message: /^description must be a string$/ },
    { name: 'description null', body: '{"name":"x","description":null}', code: 'invalid_field', message: /^description must be a string$/ },
    { name: 'a name with a lone surrogate (issue 20 F08)', body: '{"name":"a\\ud800b"}', code: 'invalid_field', message: /^name must be well-formed Unicode text/ },
    { name: 'a description with a lone surrogate (issue 20 F08)', body: '{"name":"x","description":"\\udc00"}', code: 'invalid_field', message: /^description must be well-formed Unicode text/ },
    { name: 'text/plain content type', body: '{"name":"x"}', contentType: 'text/plain', code: 'unsupported_media_type', message: /got text\/plain/ },
    { name: 'no content type', body: '{"name":"x"}', contentType: null, code: 'unsupported_media_type', message: /no Content-Type/ },
    { name: 'a form content type', body: 'name=x', contentType: 'application/x-www-form-urlencoded', code: 'unsupported_media_type', message: /form-urlencoded/ },
  ]

  it.each(cases)('answers 400 $code for $name', async ({ body, contentType, code, message }) => {
    const petstore = await harness.use()
    const answer = await call<ApiError>('/categories', {
      method: 'POST',
      ...(body !== undefined && { body }),
      ...(contentType !== undefined && { contentType }),
    })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe(code)
    expect(answer.body.message).toMatch(message)
    expect(await petstore.categories.list()).toHaveLength(5)
  })

  it('answers 400 invalid_json for bytes that are not UTF-8', async () => {
    await harness.use()
    const response = await fetch(`${BASE}/categories`, {
      method: 'POST',
      headers: { authorization: 'Bearer t0ken', 'content-type': 'application/json' },
      body: new Uint8Array([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    })
    const answer = await readConformant('POST', '/categories', response)
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ code: 'invalid_json', message: expect.stringMatching(/UTF-8/) })
  })

  it('answers 413 payload_too_large for a body over 1 MiB', async () => {
    const petstore = await harness.use()
    const answer = await call<ApiError>('/categories', { body: { name: 'x', padding: 'a'.repeat(1024 * 1024) } })
    expect(answer.status).toBe(413)
    expect(answer.body).toEqual({
      code: 'payload_too_large',
      message: 'Request body is larger than the limit of 1048576 bytes',
      status: 413,
    })
    expect(await petstore.categories.list()).toHaveLength(5)
  })

  it('accepts a body just under the limit', async () => {
    await harness.use({ maxBodyBytes: 2048 })
    const body = JSON.stringify({ name: 'x', padding: 'a'.repeat(2000) })
    expect(body.length).toBeLessThanOrEqual(2048)
    expect((await call('/categories', { body })).status).toBe(201)
    expect((await call('/categories', { body: JSON.stringify({ name: 'x', padding: 'a'.repeat(2100) }) })).status).toBe(413)
  })
})

describe('strict mode', () => {
  it('refuses unknown fields with 400 unknown_field', async () => {
    const petstore = await harness.use({ strict: true })
    const answer = await call<ApiError>('/categories', { body: { name: 'x', color: 'red' } })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('unknown_field')
    expect(answer.body.message).toContain('"color"')
    expect(await petstore.categories.list()).toHaveLength(5)
  })

  it('refuses an id in the body', async () => {
    await harness.use({ strict: true })
    const answer = await call<ApiError>('/categories', { body: { name: 'x', id: 7 } })
    expect(answer.body.code).toBe('unknown_field')
  })

  it('still accepts a valid NewCategory', async () => {
    await harness.use({ strict: true })
    expect((await call('/categories', { body: { name: 'x', description: 'y' } })).status).toBe(201)
  })
})
