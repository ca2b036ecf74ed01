/**
 * What the first create after a start costs on a large `--data-dir` database, and how long it holds the event loop:
 * `npx tsx bench/sqlite-charges.ts [tenants] [dir]` (default: 50 tenants on `large-catalog`, 500,000 rows, in a
 * temporary directory under the OS's tmpdir).
 *
 * Creates keep the room deleting the largest tenant needs (each tenant's charge, a query over its rows). Reading every
 * tenant's charge at the first create after a start held the event loop for seconds on millions of rows (review43 R7):
 * they are read only once the disk's room comes near what deleting any tenant may write (the database, twice).
 * Prints the first create's time and the event loop's longest stall meanwhile, then what reading every tenant's charge
 * costs (the per-tenant query, timed alone over every tenant: what a create pays once the disk is tight).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import Database from 'better-sqlite3'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'
import { openSqliteStorage } from '../src/storage/sqlite-storage.js'
import { seedState } from '../src/storage/storage.js'

const tenants = Number(process.argv[2] ?? 50)
const dir = mkdtempSync(join(process.argv[3] ?? tmpdir(), 'petstore-charges-'))
const options = { dir, seed: seedState(BUILTIN_SCENARIOS.empty!) }
try {
  const filling = await openSqliteStorage(options)
  const large = seedState(BUILTIN_SCENARIOS['large-catalog']!)
  for (let t = 0; t < tenants; t++) await filling.open(`tenant-${t}`).replace(large)
  await filling.close()

  const storage = await openSqliteStorage(options)
  const delay = monitorEventLoopDelay({ resolution: 1 })
  delay.enable()
  const started = performance.now()
  await storage.open('newcomer').createCategory({ name: 'first' })
  const took = performance.now() - started
  delay.disable()
  await storage.close()

  // The per-tenant query the charges are read by (as sqlite-storage.ts's tenantRows), timed over every tenant.
  const db = new Database(join(dir, 'sandbox.db'), { readonly: true })
  const rows = db.prepare(
    `WITH c AS (SELECT seq, tenant, LENGTH(CAST(tenant AS BLOB)) + LENGTH(CAST(name AS BLOB)) + IFNULL(LENGTH(CAST(description AS BLOB)), 0) AS len FROM categories WHERE tenant = ?)
     SELECT COUNT(*) AS n, SUM(NOT EXISTS (SELECT 1 FROM categories p WHERE p.seq = c.seq - 1 AND p.tenant = c.tenant)) AS runs FROM c`,
  )
  const readStarted = performance.now()
  for (let t = 0; t < tenants; t++) rows.get(`tenant-${t}`)
  const readAll = performance.now() - readStarted
  db.close()

  console.log(`rows: ${tenants * large.categories.length} in ${tenants} tenants`)
  console.log(`first create after start: ${took.toFixed(1)} ms, event loop's longest stall ${(delay.max / 1e6).toFixed(1)} ms`)
  console.log(`reading every tenant's charge (only once the disk is tight): ${readAll.toFixed(1)} ms on the event loop`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
