import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { stringWeight } from '../src/core/heap-weight.js'
import { SHAPES } from './support/heap-shapes.js'
import { REPLAYS } from './support/test-scale.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

// V8 keeps a string one byte a character while every character is Latin-1 (up to U+00FF), two
// bytes otherwise; a string's header is 16 bytes and objects are 8-aligned.
it('weighs Latin-1 text one byte a character, up to U+00FF included', () => {
  expect(stringWeight('')).toBe(16)
  expect(stringWeight('Ferrets')).toBe(24)
  expect(stringWeight('x'.repeat(100) + '\u00ff')).toBe(120)
  expect(stringWeight('café, naïve, ÿ')).toBe(32)
})

it('weighs text holding any character past Latin-1 two bytes a character, wherever it is', () => {
  const latin1 = 'x'.repeat(100)
  for (const beyond of ['\u0100', '✓', '\uffff', '🐈']) {
    const weight = 16 + (latin1.length + beyond.length) * 2
    const aligned = Math.ceil(weight / 8) * 8
    expect(stringWeight(beyond + latin1)).toBe(aligned)
    expect(stringWeight(latin1 + beyond)).toBe(aligned)
  }
  // A lone surrogate (JSON.parse makes one from "\ud800") is a UTF-16 unit past Latin-1 too.
  const lone = JSON.parse('"\\ud800"') as string
  expect(stringWeight(latin1 + lone)).toBe(224)
  expect(stringWeight('\udfff' + latin1)).toBe(224)
})

/** Runs test/support/heap-probe.ts in its own `node --expose-gc` process; one JSON value a line. */
async function probe(...args: string[]): Promise<unknown[]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/support/heap-probe.ts', ...args], { cwd: ROOT })
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown)
}

describe.runIf(REPLAYS)('the estimate against the heap V8 measures', () => {
  // @note Within 3%: a measurement after full collections varies by that much on a loaded machine
  // (the probe's own slot for each copy included; 'objects nested 250 deep' once measured 1.5%
  // over its estimate); the finding was an estimate 50 times under. At most 2.5 times the heap:
  // an estimate far above it would shrink every journal for nothing ('100 distinct property
  // names' measures 1.95-2.0 times under load, with V8's own figure swinging up to twice).
  it('never estimates an adversarial JSON shape under what V8 holds for it, nor far above that (issue 20 F05)', async () => {
    type Figure = { shape: string; measured: number; estimated: number }
    const figures = (await probe('shapes')) as Figure[]
    expect(figures.map((figure) => figure.shape)).toEqual(Object.keys(SHAPES))
    const wrong = (figure: Figure) => figure.estimated < figure.measured * 0.97 || figure.estimated > figure.measured * 2.5
    // @note A shape off is measured again, twice at most, each time in a new process, and counts
    // only when every measurement is off: on a loaded machine (a fresh clone's CI with `npm ci`
    // beside it) '100 distinct property names' once measured 5,288 bytes a copy, 13,464 idle.
    let suspects = figures.filter(wrong)
    for (let round = 0; round < 2 && suspects.length > 0; round++) suspects = ((await probe('shapes', ...suspects.map((figure) => figure.shape))) as Figure[]).filter(wrong)
    const under = suspects.filter((figure) => figure.estimated < figure.measured * 0.97)
    const over = suspects.filter((figure) => figure.estimated > figure.measured * 2.5)
    expect({ under, over }).toEqual({ under: [], over: [] })
  })

  it('keeps a 1 MiB journal of bodies with long distinct property names, each read, within its budget on the heap (issue 20 F05)', async () => {
    // The finding: `{"<64,000 distinct characters>":0}` bodies left a "1 MiB" journal holding ~42 MB.
    const budget = 1024 * 1024
    const [held] = (await probe('journal', String(budget), '200')) as { measured: number; bytes: number; size: number }[]
    expect(held!.bytes).toBeLessThanOrEqual(budget)
    // What the journal holds beyond its entries' estimate: its own arrays and bookkeeping.
    expect(held!.measured).toBeLessThan(1.5 * budget)
    expect(held!.size).toBeLessThan(200)
  })

  it('never reserves less for a list made per request than its categories as read and its JSON text hold, whatever their characters (attack2 F5)', async () => {
    // The finding: 8,960 bytes reserved a category, 13.2 KB of JSON for one of control characters.
    const dir = mkdtempSync(join(tmpdir(), 'list-probe-'))
    try {
      const figures = (await probe('list', dir, '500')) as { shape: string; read: number; readReserved: number; answer: number; answerReserved: number }[]
      expect(figures.map((figure) => figure.shape)).toEqual(['ascii', 'control', 'control-two-byte', 'astral'])
      // Before the read, its worst case; once read, the categories and the answer's text, measured (within 1%, as above; at most 1.5 times the heap).
      expect(figures.filter((figure) => figure.readReserved < figure.read)).toEqual([])
      expect(figures.filter((figure) => figure.answerReserved < figure.answer * 0.99 || figure.answerReserved > figure.answer * 1.5)).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
