/** The storage implementations every shared suite runs against, and a temporary data directory per test. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { onTestFinished } from 'vitest'
import { MemoryStorage } from '../../src/core/memory-storage.js'
import type { TenantState, TenantStorage } from '../../src/core/storage.js'
import { openSqliteStorage } from '../../src/server/sqlite-storage.js'

/** A fresh directory, removed when the test finishes. */
export function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-data-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

export interface StoreKind {
  readonly name: 'memory' | 'sqlite'
  /** A fresh storage seeded with `seed`, closed when the test finishes. */
  open(seed: TenantState): Promise<TenantStorage>
  /** Sandbox options selecting this store (a fresh data directory for SQLite). */
  sandboxOptions(): { dataDir?: string }
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
]
