/**
 * The journal seam's shared suite: the in-memory journal (the default) and the Redis one keep the
 * same entries under the same budgets, newest last, filtered alike.
 */
import { describe, expect, it, onTestFinished } from 'vitest'
import { entryWeight, JournalDraft, RequestJournal, type JournalEntry, type TenantJournal } from '../src/core/journal.js'
import { openRedisStorage } from '../src/storage/redis-storage.js'
import { REQUIRE_REDIS } from './support/redis-server.js'
import { redisPrefix, redisUrl } from './support/stores.js'

interface JournalKind {
  readonly name: string
  open(limit?: number, bytes?: number): Promise<TenantJournal>
}

const KINDS: JournalKind[] = [
  { name: 'memory', open: (limit, bytes) => Promise.resolve(new RequestJournal(limit, bytes)) },
  ...(REQUIRE_REDIS
    ? [
        {
          name: 'redis',
          open: async (limit?: number, bytes?: number) => {
            const storage = await openRedisStorage({ url: redisUrl(), seed: { scenario: 'empty', categories: [], nextCategoryId: 1 }, prefix: redisPrefix(), journalBytes: bytes })
            onTestFinished(() => storage.close())
            return storage.journal('t1', limit)
          },
        },
      ]
    : []),
]

function entry(path: string, method = 'GET', status = 200): Omit<JournalEntry, 'id'> {
  return {
    time: '2026-01-01T00:00:00.000Z',
    durationMs: 1,
    operation: method === 'GET' ? 'listCategories' : 'createCategory',
    method,
    url: `https://api.shop.test${path}`,
    path,
    request: { headers: { 'x-n': path }, body: method === 'POST' ? { name: 'Ferrets' } : undefined },
    response: { status, body: [{ id: 1, name: 'Dogs' }] },
  }
}

describe.each(KINDS)('$name journal', (kind) => {
  it('keeps entries newest last with increasing ids, request and response as recorded', async () => {
    const journal = await kind.open()
    await journal.record(entry('/v1/categories', 'POST', 201))
    await journal.record(entry('/v1/categories'))
    const all = await journal.all()
    expect(all.map((e) => [e.id, e.method])).toEqual([[1, 'POST'], [2, 'GET']])
    expect(all[0]).toMatchObject({ request: { headers: { 'x-n': '/v1/categories' }, body: { name: 'Ferrets' } }, response: { status: 201, body: [{ id: 1, name: 'Dogs' }] } })
    expect(await journal.count()).toBe(2)
  })

  it('keeps only the newest entries past the entry limit', async () => {
    const journal = await kind.open(3)
    for (let i = 1; i <= 5; i++) await journal.record(entry(`/v1/${i}`))
    expect((await journal.all()).map((e) => e.path)).toEqual(['/v1/3', '/v1/4', '/v1/5'])
  })

  it('drops the oldest entries past the byte budget (entries weighed alike in every journal), and always keeps the newest', async () => {
    // Room for two entries of this size and a half: the third pushes the oldest out.
    const weight = entryWeight({ id: 1, ...entry('/v1/1') })
    const journal = await kind.open(100, Math.floor(weight * 2.5))
    for (let i = 1; i <= 4; i++) await journal.record(entry(`/v1/${i}`))
    expect((await journal.all()).map((e) => e.path)).toEqual(['/v1/3', '/v1/4'])
    await journal.record({ ...entry('/v1/huge'), response: { status: 200, body: 'x'.repeat(10 * weight) } })
    expect((await journal.all()).map((e) => e.path)).toEqual(['/v1/huge'])
  })

  it('keeps a draft from the pipeline as the entry a reader sees (time, redacted headers, parsed bodies), weighed alike in every journal', async () => {
    const draft = (path: string) =>
      new JournalDraft({
        arrived: Date.UTC(2026, 0, 1),
        durationMs: 1.5,
        operation: 'createCategory',
        requestId: 'r-1',
        method: 'POST',
        url: `https://api.shop.test${path}`,
        path,
        headers: new Map([['authorization', 'Bearer secret'], ['content-type', 'application/json']]),
        requestText: '{"name":"Ferrets"}',
        status: 201,
        responseText: '{"id":6,"name":"Ferrets"}',
      })
    const weight = draft('/v1/1').weight
    const journal = await kind.open(100, Math.floor(weight * 2.5))
    for (let i = 1; i <= 4; i++) await journal.record(draft(`/v1/${i}`))
    const all = await journal.all()
    expect(all.map((e) => e.path)).toEqual(['/v1/3', '/v1/4'])
    expect(all[1]).toEqual({
      id: 4,
      time: '2026-01-01T00:00:00.000Z',
      durationMs: 1.5,
      operation: 'createCategory',
      requestId: 'r-1',
      method: 'POST',
      url: 'https://api.shop.test/v1/4',
      path: '/v1/4',
      request: { headers: { authorization: '[redacted]', 'content-type': 'application/json' }, body: { name: 'Ferrets' } },
      response: { status: 201, body: { id: 6, name: 'Ferrets' } },
    })
    expect(JSON.stringify(all)).not.toContain('secret')
  })

  it('keeps nothing with a limit of 0', async () => {
    const journal = await kind.open(0)
    await journal.record(entry('/v1/categories'))
    expect(await journal.all()).toEqual([])
  })

  it('filters by method and by exact or prefix path', async () => {
    const journal = await kind.open()
    await journal.record(entry('/v1/categories', 'POST', 201))
    await journal.record(entry('/v1/categories'))
    await journal.record(entry('/v1/pets/1'))
    expect((await journal.all({ method: 'post' })).map((e) => e.id)).toEqual([1])
    expect((await journal.all({ path: '/v1/pets/*' })).map((e) => e.id)).toEqual([3])
    expect((await journal.all({ path: '/v1/categories', status: 200 })).map((e) => e.id)).toEqual([2])
  })

  it('empties on clear() and goes on numbering after it', async () => {
    const journal = await kind.open()
    await journal.record(entry('/v1/a'))
    await journal.record(entry('/v1/b'))
    await journal.clear()
    expect(await journal.all()).toEqual([])
    await journal.record(entry('/v1/c'))
    expect((await journal.all()).map((e) => e.id)).toEqual([3])
  })
})
