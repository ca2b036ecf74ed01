import { afterEach, expect, it, vi } from 'vitest'
import { randomUUID } from '../src/core/random-uuid.js'

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

afterEach(() => {
  vi.unstubAllGlobals()
})

it('makes v4 UUIDs where crypto.randomUUID is missing, as in Jest 29’s jsdom', () => {
  const native = globalThis.crypto
  vi.stubGlobal('crypto', { getRandomValues: (bytes: Uint8Array) => native.getRandomValues(bytes) })
  const ids = Array.from({ length: 100 }, () => randomUUID())
  for (const id of ids) expect(id).toMatch(V4)
  expect(new Set(ids).size).toBe(100)
})

it('makes distinct v4 UUIDs with no crypto at all', () => {
  vi.stubGlobal('crypto', undefined)
  const ids = Array.from({ length: 100 }, () => randomUUID())
  for (const id of ids) expect(id).toMatch(V4)
  expect(new Set(ids).size).toBe(100)
})

it('uses the native crypto.randomUUID when there is one', () => {
  vi.stubGlobal('crypto', { randomUUID: () => '00000000-0000-4000-8000-000000000000' })
  expect(randomUUID()).toBe('00000000-0000-4000-8000-000000000000')
})
