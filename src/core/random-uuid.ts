/**
 * The version 4 UUIDs @msw/data gives its records: the build points @msw/data's own
 * `crypto.randomUUID()` calls here (`scripts/build.mjs`), so the user's globals stay untouched.
 * @note Made here rather than by the native `crypto.randomUUID()`, for two reasons:
 * - Jest 29's jsdom 20 and pages served over plain http from another host have none;
 * - Node's builds its UUID by appending 20 pieces, a rope of ~450 bytes that lives as long as
 *   the record: with @msw/data's other per-record costs, two thirds of the heap a stored category
 *   took (`npm run bench -- scale`). This one is one flat 36-character string (~56 bytes).
 * Record ids only: nothing here is a secret, but the entropy comes from `getRandomValues` when
 * there is one, drawn for many UUIDs at once, as Node's own `randomUUID` does.
 */

/** Fills `bytes` with random bytes. */
export type RandomFill = (bytes: Uint8Array) => void

/** UUIDs drawn per call of the fill. */
const POOLED = 128
const HEX = Array.from('0123456789abcdef', (digit) => digit.charCodeAt(0))
const DASH = 0x2d

/** A UUID maker drawing its bytes from `fill`, {@link POOLED} UUIDs' worth at a time. */
export function uuidMaker(fill: RandomFill): () => string {
  const pool = new Uint8Array(16 * POOLED)
  let used = pool.length
  const codes = new Array<number>(36)
  return () => {
    if (used === pool.length) {
      fill(pool)
      used = 0
    }
    let at = 0
    for (let index = 0; index < 16; index++) {
      let byte = pool[used + index]!
      if (index === 6) byte = (byte & 0x0f) | 0x40 // version 4
      else if (index === 8) byte = (byte & 0x3f) | 0x80 // RFC 9562 variant
      if (index === 4 || index === 6 || index === 8 || index === 10) codes[at++] = DASH
      codes[at++] = HEX[byte >> 4]!
      codes[at++] = HEX[byte & 0x0f]!
    }
    used += 16
    // @note One call making one string: concatenation would build a rope again.
    return String.fromCharCode(...codes)
  }
}

/** `crypto.getRandomValues` where there is one (read at each draw), else `Math.random`. */
function fillRandomly(bytes: Uint8Array): void {
  const crypto = globalThis.crypto as Crypto | undefined
  if (typeof crypto?.getRandomValues === 'function') {
    crypto.getRandomValues(bytes)
    return
  }
  for (let index = 0; index < bytes.length; index++) bytes[index] = Math.floor(Math.random() * 256)
}

export const randomUUID: () => string = uuidMaker(fillRandomly)
