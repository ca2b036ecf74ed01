/**
 * What a SQLite commit costs on this machine's disk, and how long it holds the event loop:
 * `npx tsx bench/sqlite-commit.ts [dir]` (default: a temporary directory under the OS's tmpdir).
 *
 * Three ways to make a create durable, 500 commits each of 1 and of 10 rows:
 * - `FULL, in the commit`: `synchronous=FULL`, better-sqlite3 fsyncs inside the commit, on the
 *   event loop;
 * - `NORMAL + fsync off the loop`: what `--data-dir` does: the commit writes the WAL, then an
 *   fsync of the WAL runs on libuv's thread pool (the loop is free meanwhile);
 * - `NORMAL, no fsync`: `--durability process-crash`.
 * Prints, per mode and batch size, milliseconds per durable commit and milliseconds of it the
 * event loop was held.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'

const base = process.argv[2] ?? tmpdir()
const COMMITS = 500

type Mode = 'FULL, in the commit' | 'NORMAL + fsync off the loop' | 'NORMAL, no fsync'
const modes: Mode[] = ['FULL, in the commit', 'NORMAL + fsync off the loop', 'NORMAL, no fsync']
const results: { mode: Mode; rowsPerCommit: number; msPerCommit: number; loopHeldMsPerCommit: number }[] = []

for (const mode of modes) {
  const dir = mkdtempSync(join(base, 'petstore-commit-'))
  const db = new Database(join(dir, 'bench.db'))
  db.pragma('locking_mode = EXCLUSIVE')
  db.pragma('journal_mode = WAL')
  db.pragma(`synchronous = ${mode.startsWith('FULL') ? 'FULL' : 'NORMAL'}`)
  db.exec('CREATE TABLE categories (seq INTEGER PRIMARY KEY, tenant TEXT, id INTEGER, name TEXT)')
  const wal = await open(join(dir, 'bench.db-wal'), 'r')
  const insert = db.prepare('INSERT INTO categories (tenant, id, name) VALUES (?, ?, ?)')
  const commit = db.transaction((rows: number, from: number) => {
    for (let i = 0; i < rows; i++) insert.run('tenant', from + i, `category ${from + i}`)
  })
  for (const rows of [1, 10]) {
    let held = 0
    const started = performance.now()
    for (let i = 0; i < COMMITS; i++) {
      const before = performance.now()
      commit(rows, i * rows)
      held += performance.now() - before
      if (mode === 'NORMAL + fsync off the loop') await wal.datasync()
    }
    const elapsed = performance.now() - started
    const round = (ms: number) => Math.round((ms / COMMITS) * 1000) / 1000
    results.push({ mode, rowsPerCommit: rows, msPerCommit: round(elapsed), loopHeldMsPerCommit: round(held) })
  }
  await wal.close()
  db.close()
  rmSync(dir, { recursive: true, force: true })
}
process.stdout.write(`${JSON.stringify({ dir: base, commits: COMMITS, results }, null, 2)}\n`)
