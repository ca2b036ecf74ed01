/**
 * A power cut on SQLite (issue 20, review of attack8 A1): the storage checkpoints the WAL itself
 * under `synchronous = OFF`. The first commit after a checkpoint that copied the whole WAL
 * rewrites it from its start, and SQLite does not sync the new header first; a power cut before
 * that commit's fsync can leave the old header over old frames with new ones past them. Recovery
 * then reads the old frames' page images over the newer ones in the database: acknowledged writes
 * rolled back, or a corrupt database. The disk image such a cut leaves is built here byte by byte.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { BUILTIN_SCENARIOS } from '../../src/scenario/builtin-scenarios.js'
import { seedState } from '../../src/storage/storage.js'
import { DATABASE_FILE, openSqliteStorage } from '../../src/storage/sqlite-storage.js'
import { fileHandleMethod } from '../support/file-handles.js'
import { dataDir } from '../support/stores.js'

const SEED = seedState(BUILTIN_SCENARIOS['default']!)
const LARGE = seedState(BUILTIN_SCENARIOS['large-catalog']!)
const EMPTY = seedState(BUILTIN_SCENARIOS['empty']!)

/** A WAL file's frames: where each starts, and whether it ends a commit (SQLite's WAL format). */
function frames(wal: Buffer): { pageSize: number; offsets: number[]; commits: number[] } {
  if (wal.length < 32) return { pageSize: 0, offsets: [], commits: [] }
  const pageSize = wal.readUInt32BE(8)
  const offsets: number[] = []
  const commits: number[] = []
  for (let offset = 32; offset + 24 + pageSize <= wal.length; offset += 24 + pageSize) {
    offsets.push(offset)
    if (wal.readUInt32BE(offset + 4) !== 0) commits.push(offsets.length)
  }
  return { pageSize, offsets, commits }
}

describe('SQLite after a power cut', () => {
  it('keeps every acknowledged write when the cut loses the start of the first commit after a checkpoint', async () => {
    const dir = dataDir()
    const storage = await openSqliteStorage({ dir, seed: SEED })
    const wal = join(dir, `${DATABASE_FILE}-wal`)
    const names = Array.from({ length: 40 }, (_, index) => `acknowledged-${index}`)
    for (const name of names) await storage.create('a', { name }, Number.POSITIVE_INFINITY)
    // Switches of another tenant fill the WAL past its checkpoint size (1000 pages).
    // No write while the checkpoint is under way: the WAL is then left as it makes it.
    let last = EMPTY
    for (let round = 0; statSync(wal).size <= 1000 * 4096 && round < 20; round++) {
      last = round % 2 === 0 ? LARGE : EMPTY
      expect(await storage.replace('b', last)).toBe(true)
    }
    await vi.waitFor(() => expect(storage.checkpoints).toBe(1), { timeout: 10_000 })
    const before = readFileSync(wal)
    const database = readFileSync(join(dir, DATABASE_FILE))
    // The next commit: large, so it spans many frames.
    expect(await storage.replace('c', LARGE)).toBe(true)
    const after = readFileSync(wal)
    const old = frames(before)
    const next = frames(after)
    expect(next.offsets.length).toBeGreaterThan(10)
    // The cut: the new header and the new frames up to old commit k never reached the disk; the
    // rest of the new commit did. k: the last old commit the new frames reach past, else frame 1.
    const k = old.commits.filter((index) => index < next.offsets.length).at(-1) ?? 1
    const image = Buffer.alloc(Math.max(before.length, after.length))
    before.copy(image)
    after.copy(image, next.offsets[k], next.offsets[k])
    const cut = dataDir()
    writeFileSync(join(cut, DATABASE_FILE), database)
    writeFileSync(join(cut, `${DATABASE_FILE}-wal`), image)
    await storage.close()
    const recovered = await openSqliteStorage({ dir: cut, seed: SEED })
    try {
      expect((await recovered.state('a')).categories.map((category) => category.name)).toEqual([...SEED.categories.map((category) => category.name), ...names])
      expect((await recovered.state('b')).categories).toHaveLength(last.categories.length)
    } finally {
      await recovered.close()
    }
    // And the directory closed cleanly reopens whole.
    const reopened = await openSqliteStorage({ dir, seed: SEED })
    expect((await reopened.state('c')).categories).toHaveLength(LARGE.categories.length)
    await reopened.close()
  })

  it('leaves nothing in the database file past its last fsync when it closes, refusing writes that arrive meanwhile (503, not kept)', async () => {
    const dir = dataDir()
    const path = join(dir, DATABASE_FILE)
    const storage = await openSqliteStorage({ dir, seed: SEED })
    await storage.create('a', { name: 'before' }, Number.POSITIVE_INFINITY)
    const database = statSync(path).ino
    const { prototype, real } = await fileHandleMethod(dir, 'datasync')
    let unstall!: () => void
    const stall = new Promise<void>((resolve) => (unstall = resolve))
    onTestFinished(() => unstall())
    let stalled = 0
    // What a power cut leaves of the database file: its bytes at its last fsync.
    let synced: Buffer | undefined
    // The last checkpoint's fsync of the database waits: the use and write below arrive while it holds commits.
    const spy = vi.spyOn(prototype, 'datasync').mockImplementation(async function (this: FileHandle) {
      if ((await this.stat()).ino !== database) return real.call(this)
      stalled++
      await stall
      await real.call(this)
      synced = readFileSync(path)
    })
    onTestFinished(() => spy.mockRestore())
    const closed = storage.close()
    await vi.waitFor(() => expect(stalled).toBe(1))
    await storage.touch('a')
    const during = storage.create('b', { name: 'during' }, Number.POSITIVE_INFINITY).then(
      () => 'answered',
      (error: Error) => error.name,
    )
    unstall()
    await closed
    expect(await during).toBe('StorageUnavailableError')
    spy.mockRestore()
    expect(readFileSync(path).equals(synced!)).toBe(true)
    const reopened = await openSqliteStorage({ dir, seed: SEED })
    expect((await reopened.state('b')).categories.map((category) => category.name)).not.toContain('during')
    expect((await reopened.state('a')).categories.map((category) => category.name)).toContain('before')
    await reopened.close()
  })

  it('fsyncs the WAL it makes at start, the database, and the directory naming them, before it takes a write', async () => {
    const dir = dataDir()
    const synced: string[] = []
    const named = (handle: FileHandle) => handle.stat().then((stat) => [stat.ino, stat.isDirectory()] as const)
    for (const method of ['sync', 'datasync'] as const) {
      const { prototype, real } = await fileHandleMethod(dir, method)
      const spy = vi.spyOn(prototype, method).mockImplementation(async function (this: FileHandle) {
        const [ino, directory] = await named(this)
        await real.call(this)
        synced.push(directory ? 'directory' : ino === statSync(join(dir, DATABASE_FILE)).ino ? 'database' : 'wal')
      })
      onTestFinished(() => spy.mockRestore())
    }
    const storage = await openSqliteStorage({ dir, seed: SEED })
    expect(new Set(synced)).toEqual(new Set(['wal', 'database', 'directory']))
    await storage.close()
  })
})
