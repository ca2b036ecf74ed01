/**
 * Property-based fuzzing of `POST /categories` through the core: arbitrary JSON values, strings,
 * bytes, headers, content types and keys go through the msw handlers (msw's `getResponse`, no
 * interception), and every answer is judged against an oracle written from the contract.
 *
 * The seed is printed; `FUZZ_SEED=<n>` replays a run and `FUZZ_RUNS=<n>` changes its size:
 * 1,000 cases in `npm test` (everyone's loop), 10,000 in the full run (`PETSTORE_FULL_TESTS=1`, CI).
 */
import fc from 'fast-check'
import { getResponse } from 'msw'
import { afterAll, describe, expect, it } from 'vitest'
import { NewCategory } from '../src/contract/schemas.js'
import { createPetstore, type Petstore } from '../src/index.js'
import { expectConformant } from './support/openapi-validator.js'
import { size } from './support/test-scale.js'

const SEED = Number(process.env['FUZZ_SEED'] ?? 20_261_122)
const RUNS = size('FUZZ_RUNS', 1_000, 10_000)
const BASE = 'https://api.fuzz.test/v1'
const KEY = 'fuzz-key-3f9c0d7a'
/** A key the sandbox does not accept: it must not be echoed anywhere either. */
const WRONG_KEY = 'wrong-key-b41e55c2'
/** Small, so that the fuzzer reaches the limit often without megabyte bodies. */
const LIMIT = 2048
const DECLARED_STATUSES = [201, 400, 401, 413]
const DECLARED_FIELDS = new Set(['name', 'description'])
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype).sort()

// ---- generators ---------------------------------------------------------------------------

const utf8 = (text: string): Uint8Array<ArrayBuffer> => new TextEncoder().encode(text)

/** A character a header value may hold (Fetch refuses NUL, CR, LF and code points over 0xFF). */
const headerChar = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)),
  fc.integer({ min: 0x80, max: 0xff }).map((code) => String.fromCharCode(code)),
  fc.constant('\t'),
)
const headerValue = fc.string({ unit: headerChar, maxLength: 40 })
const headerName = fc.oneof(
  fc.stringMatching(/^[a-z0-9!#$%&'*+.^_`|~-]{1,24}$/),
  fc.constantFrom('__proto__', 'constructor', 'x-forwarded-for', 'cookie', 'accept', 'content-encoding', 'expect', 'origin'),
)
/** Headers the oracle does not model are left to their own generators. */
const MODELLED = new Set(['authorization', 'content-type', 'content-length', 'transfer-encoding', 'prefer'])
const extraHeaders = fc.array(
  fc.tuple(
    headerName.filter((name) => !MODELLED.has(name)),
    headerValue,
  ),
  { maxLength: 6 },
)

const authorization: fc.Arbitrary<readonly string[]> = fc.oneof(
  { weight: 12, arbitrary: fc.constant([`Bearer ${KEY}`]) },
  { weight: 1, arbitrary: fc.constant([]) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      [`Bearer ${WRONG_KEY}`],
      [`bearer ${KEY}`],
      [`BEARER \t ${KEY}  `],
      [`Basic ${KEY}`],
      ['Bearer'],
      [`Bearer ${KEY} extra`],
      [`Bearer ${KEY}`, `Bearer ${KEY}`],
      [`Bearer ${KEY}x`],
      [`Bearer ${KEY.slice(0, -1)}`],
    ),
  },
  { weight: 1, arbitrary: headerValue.map((value) => [value]) },
)

const contentType = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', ' application/json ', 'application/merge-patch+json'),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      undefined,
      '',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
      'json',
      'application/json, text/plain',
      'application/+json',
      'text/json',
    ),
  },
  { weight: 1, arbitrary: headerValue },
)

/** Keys that have tripped up JSON-handling code elsewhere, plus ordinary noise. */
const objectKey = fc.oneof(
  fc.constantFrom('name', 'description', 'id', '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'polluted'),
  fc.string({ maxLength: 8 }),
)
const nameValue = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '\t\n', '\u00a0', '\ufeff', '  Chats 🐈 ') },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
)
/** A JSON object text, written by hand so that duplicate and `__proto__` keys survive. */
const categoryLike = fc
  .tuple(
    fc.option(nameValue, { freq: 6 }),
    fc.option(nameValue, { freq: 2 }),
    fc.array(fc.tuple(objectKey, fc.jsonValue({ maxDepth: 3 })), { maxLength: 3 }),
    fc.boolean(),
  )
  .map(([name, description, extra, extraFirst]) => {
    const fields: [string, unknown][] = []
    if (name !== null) fields.push(['name', name])
    if (description !== null) fields.push(['description', description])
    const ordered = extraFirst ? [...extra, ...fields] : [...fields, ...extra]
    return `{${ordered.map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)}`).join(',')}}`
  })

const body: fc.Arbitrary<Uint8Array<ArrayBuffer> | undefined> = fc.oneof(
  { weight: 10, arbitrary: categoryLike.map(utf8) },
  { weight: 3, arbitrary: fc.jsonValue().map((value) => utf8(JSON.stringify(value))) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 64 }).map(utf8) },
  { weight: 1, arbitrary: fc.string({ maxLength: 64 }).map(utf8) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 64 }) },
  // Around the body limit: the JSON wrapper adds 11 bytes to the name.
  { weight: 1, arbitrary: fc.integer({ min: LIMIT - 40, max: LIMIT + 40 }).map((size) => utf8(JSON.stringify({ name: 'x'.repeat(size - 11) }))) },
  // A valid body cut short.
  { weight: 1, arbitrary: fc.tuple(categoryLike, fc.nat()).map(([text, cut]) => utf8(text).slice(0, cut % Math.max(1, text.length))) },
  // Byte-order mark, surrounding whitespace, nothing at all.
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      undefined,
      new Uint8Array(),
      utf8(' \n\t '),
      new Uint8Array([0xef, 0xbb, 0xbf, ...utf8('{"name":"bom"}')]),
      utf8('\n{"name":"padded"}\n'),
      new Uint8Array([0xc3, 0x28]),
      new Uint8Array([0xed, 0xa0, 0x80]),
      utf8('{"name":"x"}{"name":"y"}'),
      utf8(`${'['.repeat(2000)}${']'.repeat(2000)}`.slice(0, LIMIT)),
    ),
  },
)

const fuzzCase = fc.record({ authorization, contentType, body, headers: extraHeaders, strict: fc.boolean() })
type FuzzCase = typeof fuzzCase extends fc.Arbitrary<infer T> ? T : never

// ---- the oracle ---------------------------------------------------------------------------

/** What the contract says `POST /categories` answers, written apart from the core's code. */
function expectedStatus(request: Request, bytes: Uint8Array, strict: boolean): number {
  const auth = request.headers.get('authorization')
  const match = auth === null ? null : /^\s*bearer\s+(\S+)\s*$/i.exec(auth)
  if (match?.[1] !== KEY) return 401
  if (bytes.byteLength > LIMIT) return 413
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return 400
  }
  if (text.trim() === '') return 400
  const essence = (request.headers.get('content-type') ?? '').split(';', 1)[0]!.trim().toLowerCase()
  if (essence !== 'application/json' && !/^application\/[^/\s]+\+json$/.test(essence)) return 400
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return 400
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 400
  if (!NewCategory.safeParse(value).success) return 400
  if (strict && Object.keys(value).some((key) => !DECLARED_FIELDS.has(key))) return 400
  return 201
}

function requestOf(fuzz: FuzzCase): Request {
  const headers = new Headers()
  for (const [name, value] of fuzz.headers) headers.append(name, value)
  for (const value of fuzz.authorization) headers.append('authorization', value)
  if (fuzz.contentType !== undefined) headers.set('content-type', fuzz.contentType)
  return new Request(`${BASE}/categories`, {
    method: 'POST',
    headers,
    ...(fuzz.body === undefined ? {} : { body: fuzz.body }),
  })
}

// ---- the property -------------------------------------------------------------------------

const petstores = {
  lenient: createPetstore({ baseUrl: BASE, apiKeys: [KEY], scenario: 'empty', maxBodyBytes: LIMIT }),
  strict: createPetstore({ baseUrl: BASE, apiKeys: [KEY], scenario: 'empty', maxBodyBytes: LIMIT, strict: true }),
}
const statuses = new Map<number, number>()
/** Categories each petstore holds, by the oracle's count: one more on each 201, none after a reset. */
const held = new Map<Petstore, number>(Object.values(petstores).map((petstore) => [petstore, 0]))

afterAll(() => {
  const histogram = [...statuses].sort(([a], [b]) => a - b).map(([status, count]) => `${status}: ${count}`).join(', ')
  console.log(`fuzz-create: seed=${SEED} runs=${RUNS} statuses {${histogram}}`)
})

async function check(fuzz: FuzzCase): Promise<void> {
  const petstore: Petstore = fuzz.strict ? petstores.strict : petstores.lenient
  const before = held.get(petstore)!
  const request = requestOf(fuzz)
  const bytes = fuzz.body ?? new Uint8Array()
  const expected = expectedStatus(request, bytes, fuzz.strict)

  const response = await getResponse(petstore.handlers, request)
  expect(response, 'no handler answered').toBeDefined()
  const text = await response!.text()
  const answer: unknown = JSON.parse(text)
  statuses.set(response!.status, (statuses.get(response!.status) ?? 0) + 1)

  expect(DECLARED_STATUSES).toContain(response!.status)
  expect(response!.status).toBe(expected)
  expectConformant('POST', '/categories', response!.status, response!.headers.get('content-type'), answer)
  held.set(petstore, before + (response!.status === 201 ? 1 : 0))
  expect(await petstore.categories.list()).toHaveLength(held.get(petstore)!)
  if (response!.status === 201) {
    const sent = JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>
    const created = answer as Record<string, unknown>
    expect(Object.getPrototypeOf(created)).toBe(Object.prototype)
    expect(created).toEqual({ id: before + 1, name: sent['name'], ...(sent['description'] === undefined ? {} : { description: sent['description'] }) })
  }
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTOTYPE_NAMES)
  expect(text).not.toContain(KEY)
  expect(text).not.toContain(WRONG_KEY)
  const journaled = JSON.stringify(petstore.requests.all().at(-1))
  expect(journaled).not.toContain(KEY)
  expect(journaled).not.toContain(WRONG_KEY)
}

describe('createCategory under fuzzing', () => {
  it(
    'answers only declared statuses, conformant bodies, 201 exactly for valid bodies, and grows the store only on 201',
    async () => {
      await Promise.all([petstores.lenient.ready, petstores.strict.ready])
      await fc.assert(
        fc.asyncProperty(fuzzCase, async (fuzz) => {
          // A fresh store now and then keeps every case as cheap as the first.
          for (const petstore of Object.values(petstores)) {
            if (held.get(petstore)! < 500) continue
            await petstore.reset()
            held.set(petstore, 0)
          }
          await check(fuzz)
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true },
      )
      expect([...statuses.values()].reduce((sum, count) => sum + count, 0)).toBeGreaterThanOrEqual(RUNS)
      // The generators must reach every declared status, or the property proves little.
      for (const status of DECLARED_STATUSES) expect(statuses.get(status) ?? 0, `status ${status}`).toBeGreaterThan(RUNS / 100)
    },
    120_000,
  )
})
