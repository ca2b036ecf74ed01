/**
 * The TTL sweep never trusts the machine's clock (issue 20, left open after F11): a clock
 * stepped forward past the TTL must not forget every tenant, and one stepped back must not keep
 * tenants used "in the future" for good. SQLite measures on its own clock (the time the store
 * was open, kept across restarts); memory on the monotonic clock.
 */
import Sqlite from 'better-sqlite3'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { MemoryStorage } from '../../src/storage/memory-storage.js'
import { seedState } from '../../src/storage/storage.js'
import { BUILTIN_SCENARIOS } from '../../src/scenario/builtin-scenarios.js'
import { DATABASE_FILE, openSqliteStorage } from '../../src/storage/sqlite-storage.js'
import { dataDir } from '../support/stores.js'

const SEED = seedState(BUILTIN_SCENARIOS['default']!)
const DAY_MS = 24 * 60 * 60 * 1000
const TTL_MS = 30 * DAY_MS

afterEach(() => {
  vi.useRealTimers()
})

/** The machine's clock stepped by `ms` (NTP, a VM resumed, `date -s`); the monotonic clock untouched. */
function stepWallClock(ms: number): void {
  vi.setSystemTime(Date.now() + ms)
}

describe('SQLite TTL sweep and the machine clock', () => {
  it('forgets no tenant at start when the machine clock jumped 40 days ahead while the server was stopped', async () => {
    const dir = dataDir()
    const before = await openSqliteStorage({ dir, seed: SEED })
    await before.open('partner').createCategory({ name: 'kept' })
    await before.close()
    vi.useFakeTimers({ toFake: ['Date'] })
    stepWallClock(40 * DAY_MS)
    const after = await openSqliteStorage({ dir, seed: SEED })
    try {
      expect(await after.expire(TTL_MS)).toEqual([])
      expect((await after.open('partner').listCategories()).map((category) => category.name)).toContain('kept')
    } finally {
      await after.close()
    }
  })

  it('forgets no tenant when the machine clock jumps 40 days ahead while it runs', async () => {
    const storage = await openSqliteStorage({ dir: dataDir(), seed: SEED })
    try {
      await storage.open('partner').createCategory({ name: 'kept' })
      vi.useFakeTimers({ toFake: ['Date'] })
      stepWallClock(40 * DAY_MS)
      expect(await storage.expire(TTL_MS)).toEqual([])
      expect((await storage.list()).map((summary) => summary.id)).toEqual(['partner'])
    } finally {
      await storage.close()
    }
  })

  it('forgets, once the TTL has run, a tenant last used while the machine clock was a year ahead', async () => {
    const storage = await openSqliteStorage({ dir: dataDir(), seed: SEED })
    try {
      vi.useFakeTimers({ toFake: ['Date', 'performance'] })
      stepWallClock(365 * DAY_MS)
      await storage.open('ahead').createCategory({ name: 'written in the future' })
      stepWallClock(-365 * DAY_MS)
      await storage.open('recent').createCategory({ name: 'written now' })
      vi.advanceTimersByTime(20 * DAY_MS)
      await storage.touch('recent')
      vi.advanceTimersByTime(11 * DAY_MS)
      expect(await storage.expire(TTL_MS)).toEqual(['ahead'])
      expect((await storage.list()).map((summary) => summary.id)).toEqual(['recent'])
    } finally {
      await storage.close()
    }
  })

  it('counts the time the store was open across a restart, not the time it was stopped', async () => {
    const dir = dataDir()
    vi.useFakeTimers({ toFake: ['Date', 'performance'] })
    const first = await openSqliteStorage({ dir, seed: SEED })
    await first.open('idle').createCategory({ name: 'x' })
    vi.advanceTimersByTime(20 * DAY_MS)
    expect(await first.expire(TTL_MS)).toEqual([])
    await first.close()
    // Stopped for 90 days by the machine's clock: not counted.
    stepWallClock(90 * DAY_MS)
    const second = await openSqliteStorage({ dir, seed: SEED })
    try {
      expect(await second.expire(TTL_MS)).toEqual([])
      vi.advanceTimersByTime(11 * DAY_MS)
      expect(await second.expire(TTL_MS)).toEqual(['idle'])
    } finally {
      await second.close()
    }
  })
})

describe('SQLite databases made before the store clock', () => {
  it('opens one without used_at, its tenants counted as used when the clock starts', async () => {
    const dir = dataDir()
    const made = await openSqliteStorage({ dir, seed: SEED })
    await made.open('old').createCategory({ name: 'from before' })
    await made.close()
    const db = new Sqlite(join(dir, DATABASE_FILE))
    // As an older version made it: no used_at, no floored, no index on them.
    db.exec("DROP INDEX tenants_by_floor_use; ALTER TABLE tenants DROP COLUMN used_at; ALTER TABLE tenants DROP COLUMN floored; DELETE FROM meta WHERE key = 'clock'")
    db.close()
    vi.useFakeTimers({ toFake: ['performance'] })
    const reopened = await openSqliteStorage({ dir, seed: SEED })
    try {
      expect(await reopened.expire(TTL_MS)).toEqual([])
      expect((await reopened.open('old').listCategories()).map((category) => category.name)).toContain('from before')
      vi.advanceTimersByTime(TTL_MS + 1)
      expect(await reopened.expire(TTL_MS)).toEqual(['old'])
    } finally {
      await reopened.close()
    }
  })
})

describe('in-memory TTL sweep and the machine clock', () => {
  it('forgets no tenant when the machine clock jumps 40 days ahead, and forgets it once 30 days ran', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] })
    const storage = new MemoryStorage(SEED)
    await storage.open('partner').createCategory({ name: 'kept' })
    stepWallClock(40 * DAY_MS)
    expect(await storage.expire(TTL_MS)).toEqual([])
    vi.advanceTimersByTime(TTL_MS + 1)
    expect(await storage.expire(TTL_MS)).toEqual(['partner'])
  })
})
