/**
 * `node --expose-gc --import tsx test/support/heap-probe.ts <command>`: what V8's heap really
 * holds, measured after full collections, for test/heap-weight.test.ts. Its own process, so
 * that nothing else the test runner holds moves the figures.
 * - `shapes`: per adversarial JSON shape, the heap a parsed copy holds and what `heapWeight()`
 *   estimates for it, as JSON lines `{ shape, measured, estimated }`;
 * - `journal <budget> <entries>`: the heap a journal of that byte budget holds after that many
 *   requests whose bodies have one long distinct property name, each read (formatted) once, as
 *   `{ measured, bytes, size }`.
 */
import { heapWeight } from '../../src/core/heap-weight.js'
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
  collect()
  const measured = process.memoryUsage().heapUsed - before
  return { measured, bytes: journal.bytes, size: journal.size }
}

const [command, ...args] = process.argv.slice(2)
if (command === 'shapes') {
  for (const [shape, make] of Object.entries(SHAPES)) process.stdout.write(`${JSON.stringify({ shape, ...measureShape(make) })}\n`)
} else if (command === 'journal') {
  process.stdout.write(`${JSON.stringify(measureJournal(Number(args[0]), Number(args[1])))}\n`)
} else {
  throw new Error(`unknown command ${String(command)}: shapes or journal <budget> <entries>`)
}
