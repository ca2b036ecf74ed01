/**
 * Durable sandboxes (`dataDir` / `--data-dir`): state across restarts, torn logs, atomic
 * rewrites, batched fsyncs, and every acknowledged create surviving `kill -9`.
 */
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { Category } from '../../src/index.js'
import { logLine, readLog } from '../../src/server/durable-tenants.js'
import { tenantId } from '../../src/server/tenant-registry.js'
import { runCli } from '../support/sandbox-cli.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-data-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const KEYS = ['k1', 'k2']

async function create(fetchPath: (path: string, init?: RequestInit) => Promise<Response>, key: string, name: string): Promise<Category> {
  const response = await fetchPath('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }) })
  expect(response.status).toBe(201)
  return (await jsonOf(response)) as Category
}

async function names(fetchPath: (path: string, init?: RequestInit) => Promise<Response>, key: string): Promise<string[]> {
  const response = await fetchPath('/v1/categories', { headers: auth(key) })
  expect(response.status).toBe(200)
  return ((await jsonOf(response)) as Category[]).map((category) => category.name)
}

describe('durable sandboxes', () => {
  it('keeps each tenant’s creates across a restart, apart from the other tenant’s', async () => {
    const dir = dataDir()
    const first = await startSandbox({ apiKeys: KEYS, scenario: 'empty', dataDir: dir })
    await create(first.fetch, 'k1', 'one')
    await create(first.fetch, 'k1', 'two')
    await create(first.fetch, 'k2', 'other')
    const second = await startSandbox({ apiKeys: KEYS, scenario: 'empty', dataDir: dir })
    expect(await names(second.fetch, 'k1')).toEqual(['one', 'two'])
    expect(await names(second.fetch, 'k2')).toEqual(['other'])
    expect((await create(second.fetch, 'k1', 'three')).id).toBe(3)
  })

  it('names tenant directories by tenant id and never writes a key to disk', async () => {
    const dir = dataDir()
    const sandbox = await startSandbox({ apiKeys: ['secret-key-9f2e'], dataDir: dir })
    await create(sandbox.fetch, 'secret-key-9f2e', 'x')
    expect(readdirSync(dir)).toEqual([tenantId('secret-key-9f2e')])
    for (const file of readdirSync(join(dir, tenantId('secret-key-9f2e')))) {
      expect(readFileSync(join(dir, tenantId('secret-key-9f2e'), file), 'utf8')).not.toContain('secret-key-9f2e')
    }
  })

  it('keeps a scenario switch and a reset across a restart', async () => {
    const dir = dataDir()
    const first = await startSandbox({ apiKeys: KEYS, dataDir: dir })
    const switched = await first.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('k1', true), body: '{"name":"empty"}' })
    expect(switched.status).toBe(200)
    await create(first.fetch, 'k1', 'after switch')
    await create(first.fetch, 'k2', 'before reset')
    expect((await first.fetch('/__sandbox/reset', { method: 'POST', headers: auth('k2') })).status).toBe(200)
    const second = await startSandbox({ apiKeys: KEYS, dataDir: dir })
    expect(await names(second.fetch, 'k1')).toEqual(['after switch'])
    const state = (await jsonOf(await second.fetch('/__sandbox/state', { headers: auth('k1') }))) as { scenario: { name: string } }
    expect(state.scenario.name).toBe('empty')
    expect(await names(second.fetch, 'k2')).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
  })

  it.each([
    { name: 'half a line', tail: '{"generation":1,"category":{"id":3,"na' },
    { name: 'a line with a wrong checksum', tail: '{"generation":1,"category":{"id":3,"name":"forged"}}\t0000000000000000\n' },
    { name: 'random bytes', tail: '\u0000\u00ff\ufffd garbage\n\n' },
  ])('starts after $name at the end of the log, keeping every record before it', async ({ tail }) => {
    const dir = dataDir()
    const warnings: string[] = []
    const first = await startSandbox({ apiKeys: KEYS, scenario: 'empty', dataDir: dir })
    await create(first.fetch, 'k1', 'kept 1')
    await create(first.fetch, 'k1', 'kept 2')
    const log = join(dir, tenantId('k1'), 'log.jsonl')
    const validSize = statSync(log).size
    appendFileSync(log, tail)
    const second = await startSandbox({ apiKeys: KEYS, scenario: 'empty', dataDir: dir, warn: (message) => warnings.push(message) })
    expect(await names(second.fetch, 'k1')).toEqual(['kept 1', 'kept 2'])
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain(`${Buffer.byteLength(tail)} torn or corrupt bytes`)
    expect(validSize).toBeGreaterThan(0)
  })

  it('reads a log up to the first bad line only', () => {
    const good = logLine({ generation: 1, category: { id: 1, name: 'a' } })
    const later = logLine({ generation: 1, category: { id: 3, name: 'c' } })
    const bytes = Buffer.from(`${good}{"generation":1,"category":{"id":2}}\tbad\n${later}`)
    expect(readLog(bytes)).toEqual({ records: [{ generation: 1, category: { id: 1, name: 'a' } }], validBytes: Buffer.byteLength(good) })
  })

  it('shares fsyncs between concurrent creates', async () => {
    const sandbox = await startSandbox({ apiKeys: KEYS, scenario: 'empty', dataDir: dataDir() })
    await names(sandbox.fetch, 'k1')
    const created = await Promise.all(Array.from({ length: 50 }, (_, i) => create(sandbox.fetch, 'k1', `c${i}`)))
    expect(new Set(created.map((category) => category.id)).size).toBe(50)
    expect(sandbox.sandbox.durable!.logSyncs).toBeLessThan(50)
  })

  it('replaces the state file atomically: no temp file is left and the log is emptied by a reset', async () => {
    const dir = dataDir()
    const sandbox = await startSandbox({ apiKeys: KEYS, dataDir: dir })
    await create(sandbox.fetch, 'k1', 'x')
    expect((await sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: auth('k1') })).status).toBe(200)
    const files = readdirSync(join(dir, tenantId('k1'))).sort()
    expect(files).toEqual(['log.jsonl', 'state.json'])
    expect(statSync(join(dir, tenantId('k1'), 'log.jsonl')).size).toBe(0)
  })

  it('keeps every acknowledged create after kill -9 mid-load', async () => {
    const dir = dataDir()
    const serve = ['serve', '--port', '0', '--quiet', '--scenario', 'empty', '--api-key', 'k1,k2', '--data-dir', dir]
    const first = runCli(serve)
    await first.waitFor('is running')
    const origin = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(first.stdout())![1]!
    const acknowledged: { key: string; category: Category }[] = []
    let killed = false
    // Eight clients create as fast as they can; the server is killed once 200 creates are acknowledged.
    const client = async (worker: number) => {
      const key = KEYS[worker % 2]!
      for (let i = 0; i < 1000 && !killed; i++) {
        try {
          const response = await fetch(`${origin}/v1/categories`, { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name: `w${worker}-${i}` }) })
          if (response.status === 201) acknowledged.push({ key, category: (await response.json()) as Category })
        } catch {
          return // the server is gone: this request was never acknowledged
        }
        if (acknowledged.length >= 200 && !killed) {
          killed = true
          first.child.kill('SIGKILL')
        }
      }
    }
    await Promise.all(Array.from({ length: 8 }, (_, worker) => client(worker)))
    await first.exited
    expect(first.child.signalCode).toBe('SIGKILL')
    expect(acknowledged.length).toBeGreaterThanOrEqual(200)

    const second = runCli(serve)
    await second.waitFor('is running')
    const restarted = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(second.stdout())![1]!
    for (const key of KEYS) {
      const listed = (await (await fetch(`${restarted}/v1/categories`, { headers: auth(key) })).json()) as Category[]
      const mine = acknowledged.filter((entry) => entry.key === key).map((entry) => entry.category)
      expect(listed).toEqual(expect.arrayContaining(mine))
      expect(new Set(listed.map((category) => category.id)).size).toBe(listed.length)
    }
    console.log(`kill -9: ${acknowledged.length} creates acknowledged before SIGKILL, all ${acknowledged.length} present after restart`)
  })
})
