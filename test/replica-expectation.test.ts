/**
 * How many replicas a Redis master is expected to have, from the links each count sees
 * (`raisedExpectation`: how many are fresh, of how many listed online): counts taken as a sandbox
 * takes them, at most a second apart while it writes, and once a second while a hold is pending.
 * The timelines are what `INFO replication` showed in attack22 S7 and attack24 R1-1.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FRESH_HOLD_MS, raisedExpectation, type PendingReplicas } from '../src/storage/redis-connection.js'

/** The count expected after counts of `fresh` links of `listed` at the given times (ms), from `expected`. */
function expectedAfter(counts: readonly (readonly [at: number, fresh: number, listed: number])[], expected = 0): number {
  let pending: PendingReplicas | undefined
  for (const [at, fresh, listed] of counts) ({ expected, pending } = raisedExpectation(expected, fresh, listed, pending, at))
  return expected
}

describe('the replicas a master is expected to have', () => {
  it('expects one replica as soon as one link is fresh', () => {
    expect(expectedAfter([[0, 1, 1]])).toBe(1)
  })

  it('never expects two for one replica that reconnected while its old link was fresh (attack22 S7)', () => {
    // Its old link's last acknowledgement at 0, the new link from 300 ms; the old one stale from 3 s, listed until repl-timeout.
    const counts = [[400, 2, 2], [1400, 2, 2], [2400, 2, 2], [3450, 1, 2], [5000, 1, 2], [30_000, 1, 2], [60_000, 1, 1], [61_000, 1, 1]] as const
    expect(expectedAfter(counts, 1)).toBe(1)
  })

  it('expects a second replica once it has been listed for the hold and is fresh, and keeps expecting it once it is gone', () => {
    expect(expectedAfter([[0, 2, 2], [1000, 2, 2], [2000, 2, 2], [FRESH_HOLD_MS, 2, 2]], 1)).toBe(2)
    expect(expectedAfter([[0, 2, 2], [FRESH_HOLD_MS, 2, 2], [FRESH_HOLD_MS + 1000, 1, 1]], 1)).toBe(2)
  })

  it('expects a newcomer while another replica stalls now and then: stale at some counts, listed at all (attack24 R1-1)', () => {
    // The newcomer joins at 0; the old replica is stale at every count but one in three.
    const counts = Array.from({ length: 12 }, (_, second) => [second * 1000, second % 3 === 0 ? 2 : 1, 2] as const)
    expect(expectedAfter(counts, 1)).toBe(2)
  })

  it('starts the hold anew once fewer are listed than it holds', () => {
    expect(expectedAfter([[0, 2, 2], [1000, 1, 1], [FRESH_HOLD_MS, 2, 2]], 1)).toBe(1)
    expect(expectedAfter([[0, 2, 2], [1000, 1, 1], [FRESH_HOLD_MS, 2, 2], [2 * FRESH_HOLD_MS, 2, 2]], 1)).toBe(2)
  })

  it('raises to what was listed throughout and is fresh now: three links for a moment, two for the hold', () => {
    expect(expectedAfter([[0, 3, 3], [1000, 2, 2], [FRESH_HOLD_MS, 3, 3]], 1)).toBe(2)
  })

  it('never lowers the count expected, and raises it above one only to links fresh now and listed at every count of the hold', () => {
    const counts = fc.array(fc.tuple(fc.integer({ min: 1, max: 1500 }), fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 2 })), { maxLength: 40 })
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 }), counts, (start, steps) => {
        let expected = start
        let pending: PendingReplicas | undefined
        let at = 0
        const seen: [at: number, listed: number][] = []
        for (const [gap, fresh, stale] of steps) {
          at += gap
          const listed = fresh + stale
          seen.push([at, listed])
          const before = expected
          ;({ expected, pending } = raisedExpectation(expected, fresh, listed, pending, at))
          expect(expected).toBeGreaterThanOrEqual(before)
          if (expected > Math.max(before, Math.min(fresh, 1))) {
            expect(expected).toBeLessThanOrEqual(fresh)
            // Listed at every count for the hold: a count at or before its start saw as many, and every one since.
            const since = seen.findLastIndex(([when]) => when <= at - FRESH_HOLD_MS)
            expect(since).toBeGreaterThanOrEqual(0)
            expect(seen.slice(since).every(([, count]) => count >= expected)).toBe(true)
          }
        }
      }),
    )
  })
})
