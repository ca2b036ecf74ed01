/**
 * What a value weighs on V8's heap, estimated from its shape: what the journal and the memory
 * budget count, rather than the length of the text the value came from.
 *
 * @note Measured on Node 20 (`bench/heap-weight.ts` prints the comparison): a parsed `{}` costs
 * 64 bytes, `[]` 40, a slot 8, a property of a small object 8, of a large one (dictionary mode,
 * as `JSON.parse` makes for many keys) about 40. A 64 KiB `[{},{},…]` text parses to 1.4 MB,
 * which is why counting text length under-counted journals 20-fold.
 */

const SLOT = 8
const ARRAY_BASE = 32
const OBJECT_BASE = 56
const FAST_PROPERTIES = 32
const FAST_PROPERTY = 8
const DICTIONARY_PROPERTY = 40
const STRING_BASE = 16
/** Values nested deeper than this are not walked (the journal keeps such bodies as text). */
const MAX_DEPTH = 300

/** Any UTF-16 code unit past Latin-1: a string holding one is stored with two bytes a character. */
const BEYOND_LATIN1 = /[\u0100-\uffff]/

/** Bytes of a string: header plus one byte per Latin-1 character, two otherwise, 8-aligned. */
export function stringWeight(text: string): number {
  // @note A regular expression, not a loop over `charCodeAt`: V8 answers it at once for a string
  // it stores one byte a character (no such string can match), where the loop read every
  // character (`npx tsx bench/heap-weight.ts`: 100 µs for a 64 KiB answer before, 16 ns now).
  return align(STRING_BASE + text.length * (BEYOND_LATIN1.test(text) ? 2 : 1))
}

/**
 * {@link stringWeight} of a string that can hold only Latin-1 characters, without reading it: a
 * URL, an HTTP method, an HTTP header's name or value (Node and Fetch alike read headers as Latin-1).
 */
export function latin1Weight(text: string): number {
  return align(STRING_BASE + text.length)
}

/** The estimated heap bytes held by `value` (its own slot in a parent not included). */
export function heapWeight(value: unknown, depth = 0): number {
  switch (typeof value) {
    case 'string':
      return stringWeight(value)
    case 'number':
      return Number.isInteger(value) && Math.abs(value) < 2 ** 30 ? 0 : 16
    case 'bigint':
      return 16 + 8 * Math.ceil(value.toString(16).length / 16)
    case 'object': {
      if (value === null) return 0
      if (depth > MAX_DEPTH) return 0
      if (Array.isArray(value)) {
        let total = ARRAY_BASE + SLOT * value.length
        for (const item of value) total += heapWeight(item, depth + 1)
        return total
      }
      const keys = Object.keys(value)
      const fast = keys.length <= FAST_PROPERTIES
      let total = OBJECT_BASE + keys.length * (fast ? FAST_PROPERTY : DICTIONARY_PROPERTY)
      for (const key of keys) {
        if (!fast) total += stringWeight(key)
        total += heapWeight((value as Record<string, unknown>)[key], depth + 1)
      }
      return total
    }
    case 'boolean':
    case 'undefined':
    case 'function':
    case 'symbol':
      return 0
  }
}

const align = (bytes: number) => Math.ceil(bytes / 8) * 8

/**
 * Told of every change to what a store or journal holds on the heap, so that a sum over many of
 * them (the server's memory budget over every live tenant) stays current without visiting each.
 */
export interface HeldBytesMeter {
  /** `delta` bytes more (or fewer, when negative) are held. */
  add(delta: number): void
}
