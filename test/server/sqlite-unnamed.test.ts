/**
 * A data directory changed by hand under a running `--data-dir` server (attack23 S1): its database
 * deleted, moved or replaced. The server kept answering 201 into files no one could open again,
 * health ok, and a second server started on the directory handed the same ids out: every one of
 * those creates was gone at the next start. Now it refuses (503) while its files are not the ones
 * the directory names, says why on health, and serves again once they are back.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'
import { dataDir } from '../support/stores.js'

function post(sandbox: RunningSandbox, name: string): Promise<Response> {
  return sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name }) })
}

async function health(sandbox: RunningSandbox): Promise<{ status: number; body: unknown }> {
  const response = await sandbox.fetch('/__sandbox/health')
  return { status: response.status, body: await jsonOf(response) }
}

const DATABASE = 'sandbox.db'

const CHANGES = {
  'the directory deleted': (dir: string) => rmSync(dir, { recursive: true, force: true }),
  'the database moved away': (dir: string) => renameSync(join(dir, DATABASE), join(dir, 'moved.db')),
  'the database replaced by another file': (dir: string) => {
    renameSync(join(dir, DATABASE), join(dir, 'old.db'))
    writeFileSync(join(dir, DATABASE), '')
  },
}

describe('a data directory changed under the running server (attack23 S1)', () => {
  it.each(Object.keys(CHANGES) as (keyof typeof CHANGES)[])('answers 503 to reads and writes with %s, and says why on health', async (change) => {
    const dir = join(dataDir(), 'data')
    mkdirSync(dir)
    const warnings: string[] = []
    const sandbox = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir, warn: (message) => warnings.push(message) })
    expect((await post(sandbox, 'kept')).status).toBe(201)
    CHANGES[change](dir)
    // Before: 201, into files no one could open again. The first write is found out after its
    // commit (before it is answered): its outcome is unknown; the next ones are refused at once.
    const first = await post(sandbox, 'unknown')
    expect(first.status).toBe(503)
    expect(await jsonOf(first)).toMatchObject({ code: 'write_outcome_unknown' })
    const refused = await post(sandbox, 'after')
    expect(refused.status).toBe(503)
    expect(await jsonOf(refused)).toMatchObject({ code: 'storage_unavailable' })
    expect((await sandbox.fetch('/v1/categories', { headers: auth('partner') })).status).toBe(503)
    expect(await health(sandbox)).toMatchObject({ status: 503, body: { status: 'degraded', storage: { kind: 'sqlite', ok: false } } })
    expect(warnings.join('\n')).toMatch(/under the running server/)
  })

  it('serves again once the database is moved back, every create answered 201 there', async () => {
    const dir = dataDir()
    const sandbox = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir })
    expect((await post(sandbox, 'first')).status).toBe(201)
    renameSync(join(dir, DATABASE), join(dir, 'moved.db'))
    expect((await post(sandbox, 'unknown')).status).toBe(503)
    expect((await post(sandbox, 'refused')).status).toBe(503)
    renameSync(join(dir, 'moved.db'), join(dir, DATABASE))
    await vi.waitFor(async () => expect((await health(sandbox)).status).toBe(200), { timeout: 5000, interval: 200 })
    expect((await post(sandbox, 'second')).status).toBe(201)
    const listed = (await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth('partner') }))) as { id: number; name: string }[]
    // The write answered write_outcome_unknown may be there; the one refused is not.
    expect(listed.map((category) => category.name).filter((name) => name !== 'unknown')).toEqual(['first', 'second'])
    expect(new Set(listed.map((category) => category.id)).size).toBe(listed.length)
  })

  it('refuses reads within about a second though nothing is written and health is not asked (attack24 S2-1)', async () => {
    const dir = dataDir()
    const sandbox = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir })
    expect((await post(sandbox, 'kept')).status).toBe(201)
    renameSync(join(dir, DATABASE), join(dir, 'moved.db'))
    renameSync(join(dir, `${DATABASE}-wal`), join(dir, 'moved.db-wal'))
    // Before: 200 with the moved database's categories until a write or health looked.
    await vi.waitFor(async () => expect((await sandbox.fetch('/v1/categories', { headers: auth('partner') })).status).toBe(503), { timeout: 3000, interval: 100 })
  })

  it('keeps every create answered 201 across the restart it asks for when only its WAL was deleted (attack24 S2-2)', async () => {
    const dir = dataDir()
    const warnings: string[] = []
    const first = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir, warn: (message) => warnings.push(message) })
    for (const name of ['a', 'b', 'c']) expect((await post(first, name)).status).toBe(201)
    rmSync(join(dir, `${DATABASE}-wal`))
    await vi.waitFor(() => expect(warnings.join('\n')).toMatch(/are copied into/), { timeout: 3000, interval: 100 })
    expect((await post(first, 'refused')).status).toBe(503)
    await first.sandbox.close()
    // Before: none of the three (the WAL that held them was gone with the process).
    const second = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir })
    const listed = (await jsonOf(await second.fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]
    expect(listed.map((category) => category.name)).toEqual(['a', 'b', 'c'])
  })

  it('refuses within about a second without fsyncs (--durability process-crash)', async () => {
    const dir = join(dataDir(), 'data')
    mkdirSync(dir)
    const sandbox = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir, durability: 'process-crash' })
    expect((await post(sandbox, 'kept')).status).toBe(201)
    rmSync(dir, { recursive: true, force: true })
    await vi.waitFor(async () => expect((await post(sandbox, 'after')).status).toBe(503), { timeout: 3000, interval: 100 })
  })
})
