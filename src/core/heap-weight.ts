/**
 * What a value weighs on V8's heap, estimated from its shape: what the journal and the memory
 * budget count, rather than the length of the text the value came from.
 *
 * @note Measured on Node 20 (`test/heap-weight.test.ts` checks every figure against V8's heap for
 * adversarial shapes; `bench/heap-weight.ts` prints the comparison): a parsed `{}` costs 56 bytes,
 * `[]` 32, a slot 8, a property name the string it is (it was once counted 8 bytes, and a
 * `{"<64,000 characters>":0}` body weighed 64 bytes for 64 KB), a new key sequence a hidden class.
 * A 64 KiB `[{},{},…]` text parses to 1.4 MB, which is why counting text length under-counted
 * journals 20-fold.
 */

const SLOT = 8
/** A `[]`: its JSArray (an empty array shares V8's empty backing store). */
const ARRAY_BASE = 32
/** The backing store's header, once an array holds anything. */
const ELEMENTS_HEADER = 16
const OBJECT_BASE = 56
/**
 * `JSON.parse` keeps an object of up to 127 properties in fast mode (a hidden class per key
 * sequence), a larger one in dictionary mode (a hash table): counted as fast up to 128, the dearer
 * of the two there.
 */
const FAST_PROPERTIES = 128
/** A property's slot in a fast-mode object. */
const FAST_PROPERTY = 8
/**
 * A fast-mode object's property under a key sequence not seen before in the value: the hidden
 * class, its descriptor and the transition to it (measured 88-110 bytes on Node 20).
 */
const SHAPE_TRANSITION = 112
/** A dictionary-mode property: its entry in a hash table kept at most a third full. */
const DICTIONARY_PROPERTY = 72
const STRING_BASE = 16
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

/**
 * The estimated heap bytes held by `value`, a tree such as a parsed JSON body or a journal entry
 * (its own slot in a parent not included). Never under what V8 holds for it, whatever its shape:
 * property names are counted as the strings they are (a name of 64,000 characters weighs 64 KB),
 * once per value, as V8 keeps one copy of each; every new key sequence pays for the hidden class
 * V8 makes for it; any depth is walked (without recursion).
 * @note `test/heap-weight.test.ts` checks it against the heap V8 measures for adversarial shapes
 * (long, many and distinct keys, deep nesting, wide arrays, long and two-byte strings).
 */
export function heapWeight(value: unknown): number {
  if (typeof value === 'string') return stringWeight(value)
  const keys = new Set<string>()
  const shapes: Shape = new Map()
  const pending: unknown[] = [value]
  let total = 0
  while (pending.length > 0) {
    const item = pending.pop()
    switch (typeof item) {
      case 'string':
        total += stringWeight(item)
        break
      case 'number':
        total += Number.isInteger(item) && Math.abs(item) < 2 ** 30 ? 0 : 16
        break
      case 'bigint':
        total += 16 + 8 * Math.ceil(item.toString(16).length / 16)
        break
      case 'object': {
        if (item === null) break
        if (Array.isArray(item)) {
          total += ARRAY_BASE + (item.length > 0 ? ELEMENTS_HEADER : 0) + SLOT * item.length
          for (const element of item as unknown[]) pending.push(element)
          break
        }
        const names = Object.keys(item)
        if (names.length <= FAST_PROPERTIES) {
          total += OBJECT_BASE + FAST_PROPERTY * names.length
          let shape = shapes
          for (const name of names) {
            let next = shape.get(name)
            if (next === undefined) {
              next = new Map()
              shape.set(name, next)
              total += SHAPE_TRANSITION
            }
            shape = next
          }
        } else {
          total += OBJECT_BASE + DICTIONARY_PROPERTY * names.length
        }
        for (const name of names) {
          if (!keys.has(name)) {
            keys.add(name)
            total += stringWeight(name)
          }
          pending.push((item as Record<string, unknown>)[name])
        }
        break
      }
      case 'boolean':
      case 'undefined':
      case 'function':
      case 'symbol':
        break
    }
  }
  return total
}

/** The key sequences seen in a value, as a tree: the hidden classes V8 makes for them. */
type Shape = Map<string, Shape>

const align = (bytes: number) => Math.ceil(bytes / 8) * 8

/**
 * Told of every change to what a store or journal holds on the heap, so that a sum over many of
 * them (the server's memory budget over every live tenant) stays current without visiting each.
 */
export interface HeldBytesMeter {
  /** `delta` bytes more (or fewer, when negative) are held. */
  add(delta: number): void
}
