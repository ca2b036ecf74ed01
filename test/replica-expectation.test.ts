/**
 * How many replicas a Redis master is expected to have, from the links each count sees
 * (`raisedExpectation`: how many are fresh, of how many listed online): counts taken as a sandbox
 * takes them, at most a second apart while it writes, and once a second while a hold is pending.
 * The timelines are what `INFO replication` showed in attack22 S7 and attack24 R1-1.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FRESH_HOLD_MS, FRESH_LAG_SECONDS, raisedExpectation, settledExpectation, SETTLED_LINK_SECONDS, type PendingReplicas, type ReplicaLink } from '../src/storage/redis-connection.js'

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

/**
 * A world of replicas, each reconnecting now and then: a link connects (the master reads from it
 * then), acknowledges every second until its replica drops it, and is listed on until the master
 * notices (at once, or `repl-timeout` on for a link left half-open); the replica's next link
 * connects after the drop. Redis's clock is read in whole seconds, as `CLIENT LIST` counts `age`
 * and `INFO` counts `lag`.
 */
interface Link {
  readonly replica: number
  readonly connected: number
  readonly dropped: number
  readonly listedUntil: number
}

function linksOf(replicas: readonly (readonly (readonly [live: number, gap: number, lingers: boolean])[])[], start: readonly number[]): Link[] {
  return replicas.flatMap((lives, replica) => {
    let at = start[replica] ?? 0
    return lives.map(([live, gap, lingers]) => {
      const link = { replica, connected: at, dropped: at + live, listedUntil: lingers ? at + live + 60_000 : at + live }
      at += live + gap
      return link
    })
  })
}

/** What a count at `at` sees: `INFO replication`'s fresh online links, and every link listed with its age (`CLIENT LIST`) and lag (`INFO`). */
function countAt(links: readonly Link[], at: number): { fresh: number; seen: ReplicaLink[] } {
  const seconds = (ms: number) => Math.floor(ms / 1000)
  const seen = links
    .filter((link) => link.connected <= at && at < link.listedUntil)
    .map((link) => {
      const lastAck = link.connected + 1000 * Math.floor((Math.min(at, link.dropped) - link.connected) / 1000)
      return { age: seconds(at) - seconds(link.connected), lag: seconds(at) - seconds(lastAck) }
    })
  return { fresh: seen.filter((link) => link.lag <= FRESH_LAG_SECONDS).length, seen }
}

describe('the replicas a master is expected to have, told apart by how long their links are connected', () => {
  it('never expects more replicas than there are, however often each reconnects, its old links half-open (attack25 R1)', () => {
    const life = fc.tuple(fc.integer({ min: 100, max: 8000 }), fc.integer({ min: 0, max: 1500 }), fc.boolean())
    fc.assert(
      fc.property(
        fc.array(fc.array(life, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 3 }),
        fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: 3, maxLength: 3 }),
        fc.array(fc.integer({ min: 50, max: 1500 }), { minLength: 1, maxLength: 80 }),
        (replicas, start, gaps) => {
          const links = linksOf(replicas, start)
          let expected = 0
          let at = 0
          for (const gap of gaps) {
            at += gap
            const { fresh, seen } = countAt(links, at)
            expected = settledExpectation(expected, fresh, seen)
            expect(expected).toBeLessThanOrEqual(replicas.length)
          }
        },
      ),
    )
  })

  it('expects a replica reconnecting every 1.5 s once, and each of three steady replicas once they are settled', () => {
    // One replica, a link every 1.5 s for 30 s, each left half-open (attack25 R1: expected 3 before).
    const flapping = linksOf([Array.from({ length: 20 }, () => [1400, 100, true] as const)], [0])
    let expected = 0
    for (let at = 0; at < 40_000; at += 250) expected = settledExpectation(expected, countAt(flapping, at).fresh, countAt(flapping, at).seen)
    expect(expected).toBe(1)
    const steady = linksOf([[[60_000, 0, false]], [[60_000, 0, false]], [[60_000, 0, false]]], [0, 700, 1900])
    const after = (at: number) => settledExpectation(0, countAt(steady, at).fresh, countAt(steady, at).seen)
    expect(after(1000)).toBe(1)
    expect(after(1900 + (SETTLED_LINK_SECONDS + 1) * 1000)).toBe(3)
  })

  it('counts a link connected for the settling time and acknowledging, and none connected for less', () => {
    expect(settledExpectation(1, 2, [{ age: 100, lag: 0 }, { age: SETTLED_LINK_SECONDS, lag: 1 }])).toBe(2)
    expect(settledExpectation(1, 2, [{ age: 100, lag: 0 }, { age: SETTLED_LINK_SECONDS - 1, lag: 0 }])).toBe(1)
    expect(settledExpectation(1, 2, [{ age: 100, lag: 0 }, { age: 100, lag: FRESH_LAG_SECONDS + 1 }])).toBe(1)
  })
})
