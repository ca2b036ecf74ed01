/**
 * Durable sandboxes (`--data-dir`): each tenant's state survives restarts and `kill -9`.
 *
 * Per tenant, a directory `DIR/<tenant id>/` (the hashed id, never the key) holds:
 * - `state.json`: the scenario name, a generation number and the categories with the next id,
 *   replaced atomically (temp file, fsync, rename, fsync of the directory);
 * - `log.jsonl`: the categories created since, one line each: `<json>\t<sha-256 prefix>\n`.
 *
 * A create is appended and fsynced before it is answered; creates arriving together share one
 * write and one fsync. On start, the log is read up to the first line that is torn or fails its
 * checksum; that tail is cut off (with a warning) and everything before it is kept. Lines of an
 * older generation (a crash between a rewrite and the log's truncation) are already in the
 * state and are skipped.
 */
import { createHash } from 'node:crypto'
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, truncateSync } from 'node:fs'
import { open, rename, truncate } from 'node:fs/promises'
import { join } from 'node:path'
import * as z from 'zod'
import { Category } from '../contract/schemas.js'
import type { DurableWrite, StoreSnapshot } from '../core/store.js'
import type { TenantDurability } from '../core/tenant.js'

const STATE_FILE = 'state.json'
const LOG_FILE = 'log.jsonl'

const SavedState = z.object({
  format: z.literal(1),
  scenario: z.string(),
  generation: z.int().min(0),
  categories: z.array(Category),
  nextCategoryId: z.int().min(1),
})
type SavedState = z.infer<typeof SavedState>

const LogRecord = z.object({ generation: z.int().min(0), category: Category })

/** What a tenant's directory held at start. */
export interface LoadedTenant {
  /** The scenario the tenant was on, when it had a saved state. */
  readonly scenario: string | undefined
  /** Its categories and next id, the log applied. */
  readonly saved: StoreSnapshot | undefined
  /** Bytes cut off the end of the log because they were torn or corrupt. */
  readonly tornBytes: number
}

const checksum = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16)

/** One log line for `record`; JSON never holds a raw tab, so the tab splits it safely. */
export function logLine(record: z.infer<typeof LogRecord>): string {
  const json = JSON.stringify(record)
  return `${json}\t${checksum(json)}\n`
}

/** The valid records at the start of a log, and the byte offset where validity ends. */
export function readLog(bytes: Buffer): { records: z.infer<typeof LogRecord>[]; validBytes: number } {
  const records: z.infer<typeof LogRecord>[] = []
  let offset = 0
  while (offset < bytes.length) {
    const end = bytes.indexOf(0x0a, offset)
    if (end === -1) break
    const line = bytes.toString('utf8', offset, end)
    const tab = line.lastIndexOf('\t')
    const json = tab === -1 ? '' : line.slice(0, tab)
    if (tab === -1 || checksum(json) !== line.slice(tab + 1)) break
    let parsed
    try {
      parsed = LogRecord.safeParse(JSON.parse(json))
    } catch {
      break
    }
    if (!parsed.success) break
    records.push(parsed.data)
    offset = end + 1
  }
  return { records, validBytes: offset }
}

/** Options of {@link DurableTenants}. */
export interface DurableTenantsOptions {
  /** Told about torn logs and other recoveries (the CLI prints them). @default none */
  readonly warn?: ((message: string) => void) | undefined
}

/** Keeps tenants' state under one directory. */
export class DurableTenants {
  readonly #dir: string
  readonly #warn: (message: string) => void
  readonly #files = new Map<string, TenantFiles>()

  constructor(dir: string, options: DurableTenantsOptions = {}) {
    this.#dir = dir
    this.#warn = options.warn ?? (() => undefined)
    mkdirSync(dir, { recursive: true })
  }

  /**
   * Reads a tenant's state (synchronously: a tenant is created inside a request, and its files
   * are small, since every start and reset compacts them). Cuts a torn tail off its log.
   */
  load(id: string): LoadedTenant {
    const dir = this.#tenantDir(id)
    mkdirSync(dir, { recursive: true })
    const state = readState(join(dir, STATE_FILE))
    const logPath = join(dir, LOG_FILE)
    const bytes = readOrEmpty(logPath)
    const { records, validBytes } = readLog(bytes)
    const tornBytes = bytes.length - validBytes
    if (tornBytes > 0) {
      this.#warn(`tenant ${id}: ${tornBytes} torn or corrupt bytes at the end of ${LOG_FILE} removed; ${records.length} records kept`)
      truncateSync(logPath, validBytes)
      const fd = openSync(logPath, 'r+')
      try {
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
    }
    const generation = state?.generation ?? 0
    const categories: Category[] = [...(state?.categories ?? [])]
    let nextCategoryId = state?.nextCategoryId ?? 1
    let applied = 0
    for (const record of records) {
      if (record.generation !== generation || record.category.id < nextCategoryId) continue
      categories.push(record.category)
      nextCategoryId = record.category.id + 1
      applied++
    }
    this.#filesOf(id).generation = generation
    const saved = state || applied > 0 ? { categories, nextCategoryId } : undefined
    return { scenario: state?.scenario, saved, tornBytes }
  }

  /** What a {@link Tenant} needs to start from `loaded` and record its writes here. */
  durability(id: string, loaded: LoadedTenant): TenantDurability {
    const files = this.#filesOf(id)
    return { saved: loaded.saved, onWrite: (write: DurableWrite, scenario: string) => files.record(write, scenario) }
  }

  /**
   * Lets go of an evicted tenant's bookkeeping once its writes are on disk, so that the map
   * stays as small as the tenant cache.
   */
  release(id: string): void {
    const files = this.#files.get(id)
    if (!files) return
    const idle = files.idle()
    void idle.then(() => {
      if (this.#files.get(id) === files && files.idle() === idle) this.#files.delete(id)
    })
  }

  /** How many fsyncs of logs have run (appends only): lets tests see batching. */
  get logSyncs(): number {
    let total = 0
    for (const files of this.#files.values()) total += files.logSyncs
    return total
  }

  /** Settles when every write handed over so far is on disk. */
  async flush(): Promise<void> {
    await Promise.all([...this.#files.values()].map((files) => files.idle()))
  }

  #tenantDir(id: string): string {
    if (!/^[\w-]{1,64}$/.test(id)) throw new Error(`not a tenant id: ${JSON.stringify(id)}`)
    return join(this.#dir, id)
  }

  #filesOf(id: string): TenantFiles {
    let files = this.#files.get(id)
    if (!files) {
      files = new TenantFiles(this.#tenantDir(id))
      this.#files.set(id, files)
    }
    return files
  }
}

/** One tenant's files: appends batched into one write and fsync, rewrites in order with them. */
class TenantFiles {
  readonly #dir: string
  generation = 0
  logSyncs = 0
  #chain: Promise<void> = Promise.resolve()
  /** Lines waiting for the next write; a new batch starts once a write has taken them. */
  #batch: { lines: string[]; done: Promise<void> } | undefined

  constructor(dir: string) {
    this.#dir = dir
  }

  record(write: DurableWrite, scenario: string): Promise<void> {
    if (write.kind === 'created') return this.#append(logLine({ generation: this.generation, category: write.category }))
    this.generation++
    const { categories, nextCategoryId } = write.snapshot
    const state: SavedState = { format: 1, scenario, generation: this.generation, categories: [...categories], nextCategoryId }
    this.#batch = undefined
    return this.#then(() => this.#rewrite(state))
  }

  idle(): Promise<void> {
    return this.#chain
  }

  #append(line: string): Promise<void> {
    if (this.#batch) {
      this.#batch.lines.push(line)
      return this.#batch.done
    }
    const batch: { lines: string[]; done: Promise<void> } = { lines: [line], done: Promise.resolve() }
    batch.done = this.#then(async () => {
      if (this.#batch === batch) this.#batch = undefined
      const file = await open(join(this.#dir, LOG_FILE), 'a')
      try {
        await file.write(batch.lines.join(''))
        await file.datasync()
        this.logSyncs++
      } finally {
        await file.close()
      }
    })
    this.#batch = batch
    return batch.done
  }

  async #rewrite(state: SavedState): Promise<void> {
    const path = join(this.#dir, STATE_FILE)
    const temp = `${path}.tmp`
    const file = await open(temp, 'w')
    try {
      await file.write(JSON.stringify(state))
      await file.sync()
    } finally {
      await file.close()
    }
    await rename(temp, path)
    await syncDir(this.#dir)
    // Only now is the log redundant: a crash before this point leaves lines of the old
    // generation, which the next start skips.
    await truncate(join(this.#dir, LOG_FILE), 0).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error
    })
  }

  /** Runs `task` after everything queued before it; a failure fails only its own writes. */
  #then(task: () => Promise<void>): Promise<void> {
    const run = this.#chain.then(task)
    this.#chain = run.catch(() => undefined)
    return run
  }
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

function readOrEmpty(path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0)
    throw error
  }
}

function readState(path: string): SavedState | undefined {
  const bytes = readOrEmpty(path)
  if (bytes.length === 0) return undefined
  const parsed = SavedState.safeParse(JSON.parse(bytes.toString('utf8')))
  if (!parsed.success) throw new Error(`${path} is not a saved sandbox state: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  return parsed.data
}
