/**
 * What a SQLite commit costs on this machine's disk, and how long it holds the event loop:
 * `npx tsx bench/sqlite-commit.ts [dir]` (default: a temporary directory under the OS's tmpdir).
 *
 * Three ways to make a create durable, 500 commits each of 1 and of 10 rows:
 * - `FULL, in the commit`: `synchronous=FULL`, better-sqlite3 fsyncs inside the commit, on the
 *   event loop;
 * - `NORMAL + fsync off the loop`: what `--data-dir` did until attack8 A1: the commit writes the
 *   WAL, then an fsync of the WAL runs on libuv's thread pool, but SQLite's automatic checkpoint
 *   (at 1000 pages of WAL) fsyncs the WAL and the database inside the commit that crosses it;
 * - `OFF + fsyncs and checkpoints off the loop`: what `--data-dir` does: SQLite fsyncs nothing;
 *   the WAL is fsynced off the loop after each commit, and past 1000 pages it is checkpointed
 *   (PASSIVE) and the database file fsynced off the loop, before the next commit;
 * - `NORMAL, no fsync`: `--durability process-crash`.
 * Prints, per mode and batch size, milliseconds per durable commit, milliseconds of it the
 * event loop was held, and the longest the loop was held by one commit (a checkpoint's).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'

const base = process.argv[2] ?? tmpdir()
const COMMITS = 2000
/** The WAL's size past which the storage checkpoints it (SQLite's automatic checkpoint's 1000 pages). */
const CHECKPOINT_BYTES = 1000 * 4096

type Mode = 'FULL, in the commit' | 'NORMAL + fsync off the loop' | 'OFF + fsyncs and checkpoints off the loop' | 'NORMAL, no fsync'
const modes: Mode[] = ['FULL, in the commit', 'NORMAL + fsync off the loop', 'OFF + fsyncs and checkpoints off the loop', 'NORMAL, no fsync']
const results: { mode: Mode; rowsPerCommit: number; msPerCommit: number; loopHeldMsPerCommit: number; longestLoopHeldMs: number }[] = []

for (const mode of modes) {
  const dir = mkdtempSync(join(base, 'petstore-commit-'))
  const db = new Database(join(dir, 'bench.db'))
  db.pragma('locking_mode = EXCLUSIVE')
  db.pragma('journal_mode = WAL')
  const own = mode.startsWith('OFF')
  db.pragma(`synchronous = ${mode.startsWith('FULL') ? 'FULL' : own ? 'OFF' : 'NORMAL'}`)
  if (own) db.pragma('wal_autocheckpoint = 0')
  if (own) db.pragma('journal_size_limit = 0')
  db.exec('CREATE TABLE categories (seq INTEGER PRIMARY KEY, tenant TEXT, id INTEGER, name TEXT)')
  const wal = await open(join(dir, 'bench.db-wal'), 'r')
  const file = await open(join(dir, 'bench.db'), 'r')
  const insert = db.prepare('INSERT INTO categories (tenant, id, name) VALUES (?, ?, ?)')
  const commit = db.transaction((rows: number, from: number) => {
    for (let i = 0; i < rows; i++) insert.run('tenant', from + i, `category ${from + i}`)
  })
  for (const rows of [1, 10]) {
    let held = 0
    let longest = 0
    const started = performance.now()
    for (let i = 0; i < COMMITS; i++) {
      const before = performance.now()
      commit(rows, i * rows)
      const took = performance.now() - before
      held += took
      longest = Math.max(longest, took)
      if (mode !== 'FULL, in the commit' && mode !== 'NORMAL, no fsync') await wal.datasync()
      if (own && (await wal.stat()).size > CHECKPOINT_BYTES) {
        const checkpointing = performance.now()
        db.pragma('wal_checkpoint(PASSIVE)')
        const took = performance.now() - checkpointing
        held += took
        longest = Math.max(longest, took)
        await file.datasync()
      }
    }
    const elapsed = performance.now() - started
    const round = (ms: number) => Math.round((ms / COMMITS) * 1000) / 1000
    results.push({ mode, rowsPerCommit: rows, msPerCommit: round(elapsed), loopHeldMsPerCommit: round(held), longestLoopHeldMs: Math.round(longest * 1000) / 1000 })
  }
  await wal.close()
  await file.close()
  db.close()
  rmSync(dir, { recursive: true, force: true })
}
process.stdout.write(`${JSON.stringify({ dir: base, commits: COMMITS, results }, null, 2)}\n`)
