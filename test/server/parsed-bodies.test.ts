/**
 * A request's parsed JSON body is garbage once judged, not held while the request waits on its
 * store (attack22 B2): JSON of small objects parses to ~20x its text, and 65 keyed 1 MiB creates
 * waiting on a Redis replica held 1.7 GB under a 64 MiB budget, which counts the text only.
 * Here the store waits at a gate (as Redis does on a stopped replica) and every parsed body is
 * followed by a WeakRef, the heap collected while the requests wait.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterEach, describe, expect, it } from 'vitest'
import type { MemoryStorage } from '../../src/storage/memory-storage.js'
import type { TenantStore } from '../../src/storage/storage.js'
import { auth, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** A body of `extra` holding `elements` empty objects: ~8 bytes of text, ~170 bytes of heap each. */
const heavy = (fields: Record<string, unknown>, elements: number) =>
  `${JSON.stringify(fields).slice(0, -1)},"extra":[${Array.from({ length: elements }, () => '{}').join(',')}]}`

const parse = JSON.parse.bind(JSON)

/**
 * Each parsed JSON text of over 100,000 characters, followed without being held.
 * @note Not `vi.spyOn`: a spy keeps every value it returned (`mock.results`).
 */
function followParsedBodies(): WeakRef<object>[] {
  const parsed: WeakRef<object>[] = []
  JSON.parse = (text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    const value: unknown = parse(text, reviver)
    if (typeof text === 'string' && text.length > 100_000 && typeof value === 'object' && value !== null) parsed.push(new WeakRef(value))
    return value
  }
  return parsed
}

/** Makes every store the sandbox opens from now on wait at a gate before it creates or replaces anything. */
function gateStores(running: RunningSandbox): { arrived: () => number; open: () => void } {
  let arrivals = 0
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  const storage = running.sandbox.storage as MemoryStorage
  const openStore = storage.open.bind(storage)
  storage.open = (id: string) => {
    const store = openStore(id)
    const gated = <K extends 'createCategory' | 'replace'>(method: K) => {
      const original = (store[method] as (...args: unknown[]) => Promise<unknown>).bind(store)
      ;(store as unknown as Record<K, unknown>)[method] = async (...args: unknown[]) => {
        arrivals++
        await opened
        return original(...args)
      }
    }
    gated('createCategory')
    gated('replace')
    return store as ReturnType<typeof openStore> & TenantStore
  }
  return { arrived: () => arrivals, open }
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** How many of `parsed` are still reachable after full collections. */
async function reachable(parsed: readonly WeakRef<object>[]): Promise<number> {
  for (let round = 0; round < 3; round++) {
    gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
  return parsed.filter((ref) => ref.deref() !== undefined).length
}

const WAITING = 4

describe('parsed request bodies while the store works', () => {
  afterEach(() => {
    JSON.parse = parse
  })

  it.each([
    ['POST /v1/categories', 'POST', '/v1/categories', (i: number) => heavy({ name: `heavy ${i}` }, 50_000), 201],
    ['PUT /__sandbox/scenario', 'PUT', '/__sandbox/scenario', () => heavy({ name: 'empty' }, 50_000), 200],
  ] as const)('holds none of %s’s parsed bodies while the store has not answered (attack22 B2)', async (_, method, path, body, status) => {
    const running = await startSandbox({ apiKeys: ['partner'] })
    const gate = gateStores(running)
    const parsed = followParsedBodies()
    const answers = Array.from({ length: WAITING }, (_, i) =>
      running.fetch(path, { method, headers: auth('partner', true), body: body(i) }).then((answer) => answer.status, (error: unknown) => String(error)),
    )
    await until(() => gate.arrived() === WAITING, `${WAITING} requests at the store`)
    expect(parsed).toHaveLength(WAITING)
    expect(await reachable(parsed), 'parsed bodies still reachable while their requests wait on the store').toBe(0)
    gate.open()
    expect(await Promise.all(answers)).toEqual(Array.from({ length: WAITING }, () => status))
  })
})
