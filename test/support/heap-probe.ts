/**
 * `node --expose-gc --import tsx test/support/heap-probe.ts <command>`: what V8's heap really
 * holds, measured after full collections, for test/heap-weight.test.ts. Its own process, so
 * that nothing else the test runner holds moves the figures.
 * - `shapes [<shape> …]`: per adversarial JSON shape (or those named), the heap a parsed copy holds and what `heapWeight()`
 *   estimates for it, as JSON lines `{ shape, measured, estimated }`;
 * - `journal <budget> <entries>`: the heap a journal of that byte budget holds after that many
 *   requests whose bodies have one long distinct property name, each read (formatted) once, as
 *   `{ measured, bytes, size }`.
 * - `list <dir> <count>`: per shape of {@link LIST_SHAPES}, the heap a list made per request
 *   holds for `count` categories at the longest lengths, read from a SQLite store in `dir`: once
 *   read (`read`), and with the JSON text of its answer (`answer`), beside what is reserved for
 *   each (`readReserved`: `listReadBytes`, before the read; `answerReserved`: `listAnswerBytes`,
 *   measured once read), as JSON lines.
 */
import { heapWeight } from '../../src/core/heap-weight.js'
import { DEFAULT_CATEGORY_LIMITS } from '../../src/contract/limits.js'
import { listAnswerBytes, listReadBytes } from '../../src/pipeline/categories.js'
import { openSqliteStorage, type SqliteStorage } from '../../src/storage/sqlite-storage.js'
import { JournalDraft, RequestJournal } from '../../src/core/journal.js'
import { SHAPES } from './heap-shapes.js'

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const collect = () => {
  gc()
  gc()
}

const COPIES = 40

/** Heap bytes per parsed copy of `shape`, and the estimate per copy. */
function measureShape(shape: (i: number) => string): { measured: number; estimated: number } {
  // @note Flat texts (a Buffer round trip): parsing a cons string would flatten it, on the heap we measure.
  const texts = Array.from({ length: COPIES }, (_, i) => Buffer.from(shape(i), 'utf8').toString('utf8'))
  collect()
  const before = process.memoryUsage().heapUsed
  const kept = texts.map((text) => JSON.parse(text) as unknown)
  collect()
  const measured = (process.memoryUsage().heapUsed - before) / COPIES
  const estimated = kept.reduce<number>((sum, value) => sum + heapWeight(value), 0) / COPIES
  return { measured: Math.round(measured), estimated: Math.round(estimated) }
}

/** The heap a journal holds after `entries` requests with a long distinct property name each, every one read once. */
function measureJournal(budget: number, entries: number): { measured: number; bytes: number; size: number } {
  collect()
  const before = process.memoryUsage().heapUsed
  const journal = new RequestJournal(1000, budget)
  record(journal, entries)
  collect()
  const measured = process.memoryUsage().heapUsed - before
  return { measured, bytes: journal.bytes, size: journal.size }
}

/**
 * Records `entries` requests in `journal`, each body with its own 64,000-character property name, each read once.
 * @note Its own function, returned from before the heap is measured: with the loop on the
 * measuring frame, the same journal measured 1.16 to 1.42 MB from one run to the next on a loaded
 * machine (the limit is 1.5 MiB), as if the frame kept some of the last bodies alive, as many as
 * V8's compilation of the loop so far happened to; recorded here, 1.07 to 1.10 MB.
 */
function record(journal: RequestJournal, entries: number): void {
  for (let i = 0; i < entries; i++) {
    const text = Buffer.from(`{"${i}${'k'.repeat(64_000)}":0}`, 'utf8').toString('utf8')
    journal.record(
      new JournalDraft({
        arrived: Date.now(),
        durationMs: 1,
        operation: 'createCategory',
        requestId: `request-${i}`,
        method: 'POST',
        url: 'http://127.0.0.1/v1/categories',
        path: '/v1/categories',
        headers: [['content-type', 'application/json']],
        requestText: text,
        status: 400,
        responseText: '{"code":"missing_field","message":"name is required"}',
      }),
    )
    // Read, as a partner polling GET /__sandbox/requests does: the entry is parsed and weighed again.
    journal.all({ path: '/v1/categories' })
  }
}

const { nameMaxLength, descriptionMaxLength } = DEFAULT_CATEGORY_LIMITS
/** Categories at the longest lengths, by what their characters cost as read and as JSON. */
export const LIST_SHAPES: Record<string, (i: number) => { name: string; description: string }> = {
  /** Plain ASCII: one byte a character read, one as JSON. */
  ascii: (i) => ({ name: `${i}`.padEnd(nameMaxLength, 'n'), description: 'd'.repeat(descriptionMaxLength) }),
  /** Control characters: one byte read, six as JSON (`\u0001`). */
  control: (i) => ({ name: `${i}`.padEnd(nameMaxLength, '\x01'), description: '\x01'.repeat(descriptionMaxLength) }),
  /** Control characters and one above Latin-1: two bytes each read, twelve as JSON (a two-byte string of escapes). */
  'control-two-byte': (i) => ({ name: `Ā${i}`.padEnd(nameMaxLength, '\x01'), description: '\x01'.repeat(descriptionMaxLength) }),
  /** Characters beyond the BMP: two UTF-16 units each, four bytes read and four as JSON. */
  astral: (i) => ({ name: `${i}`.padEnd(nameMaxLength, '😀'), description: '😀'.repeat(descriptionMaxLength) }),
}

/**
 * The heap a SQLite list of `count` categories of `shape` holds: once read (the categories), and
 * at its peak (the categories and the answer's JSON text), beside what is reserved for each.
 */
async function measureList(storage: SqliteStorage, count: number, shape: string, tenant = shape) {
  const make = LIST_SHAPES[shape]!
  const store = storage.open(tenant)
  // @note Code points, as the limits count them: an astral character is one, of two UTF-16 units.
  const categories = Array.from({ length: count }, (_, i) => {
    const { name, description } = make(i)
    return { id: i + 1, name: [...name].slice(0, nameMaxLength).join(''), description: [...description].slice(0, descriptionMaxLength).join('') }
  })
  await store.replace({ scenario: 'probe', categories, nextCategoryId: count + 1 })
  categories.length = 0
  collect()
  const before = process.memoryUsage().heapUsed
  const read = await store.listCategories()
  collect()
  const readHeld = process.memoryUsage().heapUsed - before
  const text = JSON.stringify(read)
  collect()
  const answerHeld = process.memoryUsage().heapUsed - before
  if (read.length !== count || text.length === 0) throw new Error('the list was not read')
  return { shape, read: readHeld, readReserved: listReadBytes(count, DEFAULT_CATEGORY_LIMITS), answer: answerHeld, answerReserved: listAnswerBytes(read) }
}

const [command, ...args] = process.argv.slice(2)
if (command === 'shapes') {
  // With names: those shapes only (measured again, in a process of their own).
  for (const [shape, make] of Object.entries(SHAPES)) if (args.length === 0 || args.includes(shape)) process.stdout.write(`${JSON.stringify({ shape, ...measureShape(make) })}\n`)
} else if (command === 'journal') {
  process.stdout.write(`${JSON.stringify(measureJournal(Number(args[0]), Number(args[1])))}\n`)
} else if (command === 'list') {
  const storage = await openSqliteStorage({ dir: args[0]!, seed: { scenario: 'empty', categories: [], nextCategoryId: 1 } })
  // @note A first pass, not reported: what the first list of a process allocates once (code
  // compiled, caches filled) landed in the first shape's figure, 5% above its reserve once on a
  // loaded machine (ascii, 2,484,008 measured against 2,365,440).
  for (const shape of Object.keys(LIST_SHAPES)) await measureList(storage, Number(args[1]), shape, `warm-${shape}`)
  for (const shape of Object.keys(LIST_SHAPES)) process.stdout.write(`${JSON.stringify(await measureList(storage, Number(args[1]), shape))}\n`)
  await storage.close()
} else {
  throw new Error(`unknown command ${String(command)}: shapes, journal <budget> <entries> or list <dir> <count>`)
}
