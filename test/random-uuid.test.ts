import { afterEach, expect, it, vi } from 'vitest'
import { randomUUID, uuidMaker } from '../src/core/random-uuid.js'

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

afterEach(() => {
  vi.unstubAllGlobals()
})

it('makes distinct v4 UUIDs, many more than one draw of entropy holds', () => {
  const ids = Array.from({ length: 1000 }, () => randomUUID())
  for (const id of ids) expect(id).toMatch(V4)
  expect(new Set(ids).size).toBe(1000)
})

it('spells the drawn bytes in order, with the version and variant bits set', () => {
  let draws = 0
  const next = uuidMaker((bytes) => {
    draws++
    for (let index = 0; index < bytes.length; index++) bytes[index] = (index + draws) % 256
  })
  expect(next()).toBe('01020304-0506-4708-890a-0b0c0d0e0f10')
  expect(next()).toBe('11121314-1516-4718-991a-1b1c1d1e1f20')
  expect(draws).toBe(1)
  for (let made = 2; made < 128; made++) next()
  expect(draws).toBe(1)
  // The 129th UUID draws again (the pool holds 128), from the start of the new bytes.
  expect(next()).toBe('02030405-0607-4809-8a0b-0c0d0e0f1011')
  expect(draws).toBe(2)
})

it('takes its entropy from crypto.getRandomValues, and makes v4 UUIDs where crypto.randomUUID is missing, as in Jest 29’s jsdom', () => {
  const native = globalThis.crypto
  const getRandomValues = vi.fn((bytes: Uint8Array) => native.getRandomValues(bytes))
  vi.stubGlobal('crypto', { getRandomValues })
  // Past the pool drawn before the stub, so that at least one draw comes from it.
  const ids = Array.from({ length: 300 }, () => randomUUID())
  expect(getRandomValues).toHaveBeenCalled()
  for (const id of ids) expect(id).toMatch(V4)
  expect(new Set(ids).size).toBe(300)
})

it('makes distinct v4 UUIDs with no crypto at all', () => {
  vi.stubGlobal('crypto', undefined)
  const ids = Array.from({ length: 300 }, () => randomUUID())
  for (const id of ids) expect(id).toMatch(V4)
  expect(new Set(ids).size).toBe(300)
})
