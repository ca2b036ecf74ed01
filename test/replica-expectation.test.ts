/**
 * How many replicas a Redis master is expected to have, from the fresh links each count sees
 * (`raisedExpectation`): counts taken as a sandbox takes them, at most a second apart while it
 * writes, and once more when a pending count is due. The timelines are what `INFO replication`
 * showed in attack22 S7 and in a second replica attached for good.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FRESH_HOLD_MS, raisedExpectation, type PendingReplicas } from '../src/storage/redis-connection.js'

/** The count expected after counts of `fresh` links at the given times (ms), from `expected`. */
function expectedAfter(counts: readonly (readonly [at: number, fresh: number])[], expected = 0): number {
  let pending: PendingReplicas | undefined
  for (const [at, fresh] of counts) ({ expected, pending } = raisedExpectation(expected, fresh, pending, at))
  return expected
}

describe('the replicas a master is expected to have', () => {
  it('expects one replica as soon as one link is fresh', () => {
    expect(expectedAfter([[0, 1]])).toBe(1)
  })

  it('never expects two for one replica that reconnected while its old link was fresh (attack22 S7)', () => {
    // Its old link's last acknowledgement at 0, the new link from 300 ms; the old one is stale from 3 s.
    const counts = [[400, 2], [1400, 2], [2400, 2], [400 + FRESH_HOLD_MS + 50, 1], [5000, 1], [60_000, 1]] as const
    expect(expectedAfter(counts, 1)).toBe(1)
  })

  it('expects a second replica once it has been fresh at every count for the hold, and keeps expecting it once it is gone', () => {
    expect(expectedAfter([[0, 2], [1000, 2], [2000, 2], [FRESH_HOLD_MS, 2]], 1)).toBe(2)
    expect(expectedAfter([[0, 2], [FRESH_HOLD_MS, 2], [FRESH_HOLD_MS + 1000, 1]], 1)).toBe(2)
  })

  it('starts the hold anew when a count sees no more than expected in between', () => {
    expect(expectedAfter([[0, 2], [1000, 1], [FRESH_HOLD_MS, 2]], 1)).toBe(1)
    expect(expectedAfter([[0, 2], [1000, 1], [FRESH_HOLD_MS, 2], [2 * FRESH_HOLD_MS, 2]], 1)).toBe(2)
  })

  it('raises to what held throughout: three links for a moment, two for the hold', () => {
    expect(expectedAfter([[0, 3], [1000, 2], [FRESH_HOLD_MS, 3]], 1)).toBe(2)
  })

  it('never lowers the count expected, and never raises it past a count some reading within the hold saw', () => {
    const counts = fc.array(fc.tuple(fc.integer({ min: 1, max: 1500 }), fc.integer({ min: 0, max: 4 })), { maxLength: 40 })
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 }), counts, (start, steps) => {
        let expected = start
        let pending: PendingReplicas | undefined
        let at = 0
        const seen: [number, number][] = []
        for (const [gap, fresh] of steps) {
          at += gap
          seen.push([at, fresh])
          const before = expected
          ;({ expected, pending } = raisedExpectation(expected, fresh, pending, at))
          expect(expected).toBeGreaterThanOrEqual(before)
          if (expected > Math.max(before, Math.min(fresh, 1))) {
            // Raised above one: every count over the last hold saw at least as many.
            const window = seen.filter(([when]) => when >= at - FRESH_HOLD_MS)
            expect(window.every(([, count]) => count >= expected)).toBe(true)
            expect(window[0]![0]).toBeLessThanOrEqual(at - FRESH_HOLD_MS + 1500)
          }
        }
      }),
    )
  })
})
