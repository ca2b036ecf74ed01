/** The storage implementations every shared suite runs against, and a temporary data directory per test. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { inject, onTestFinished } from 'vitest'
import { MemoryStorage } from '../../src/storage/memory-storage.js'
import type { TenantState, TenantStorage } from '../../src/storage/storage.js'
import { openRedisStorage } from '../../src/storage/redis-storage.js'
import { openSqliteStorage } from '../../src/storage/sqlite-storage.js'
import { REQUIRE_REDIS } from './redis-server.js'

/** A fresh directory, removed when the test finishes. */
export function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-data-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

export interface StoreKind {
  readonly name: 'memory' | 'sqlite' | 'redis'
  /** A fresh storage seeded with `seed`, closed when the test finishes. */
  open(seed: TenantState): Promise<TenantStorage>
  /** Sandbox options selecting this store (a fresh data directory for SQLite). */
  sandboxOptions(): { dataDir?: string; redisUrl?: string; redisPrefix?: string }
}

let prefixes = 0
/** A key prefix no other test of the run uses, so tests sharing the run's redis-server keep apart. */
export function redisPrefix(): string {
  return `test-${process.pid}-${++prefixes}:`
}

/** The run's shared redis-server (see global-redis.ts); fails the test when there is none. */
export function redisUrl(): string {
  const url = inject('redisUrl')
  if (!url) throw new Error('redis-server is not installed (apt-get install redis-server): the Redis store cannot be tested')
  return url
}

const REDIS: StoreKind = {
  name: 'redis',
  open: async (seed) => {
    const storage = await openRedisStorage({ url: redisUrl(), seed, prefix: redisPrefix() })
    onTestFinished(() => storage.close())
    return storage
  },
  sandboxOptions: () => ({ redisUrl: redisUrl(), redisPrefix: redisPrefix() }),
}

export const STORES: readonly StoreKind[] = [
  {
    name: 'memory',
    open: (seed) => {
      const storage = new MemoryStorage(seed)
      onTestFinished(() => storage.close())
      return Promise.resolve(storage)
    },
    sandboxOptions: () => ({}),
  },
  {
    name: 'sqlite',
    open: async (seed) => {
      const storage = await openSqliteStorage({ dir: dataDir(), seed })
      onTestFinished(() => storage.close())
      return storage
    },
    sandboxOptions: () => ({ dataDir: dataDir() }),
  },
  ...(REQUIRE_REDIS ? [REDIS] : []),
]
