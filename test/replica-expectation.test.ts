/**
 * How many replicas a Redis master is expected to have, from the links each count sees
 * (`raisedExpectation`: how many are fresh, of how many listed online): counts taken as a sandbox
 * takes them, at most a second apart while it writes, and once a second while a hold is pending.
 * The timelines are what `INFO replication` showed in attack22 S7 and attack24 R1-1.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FRESH_HOLD_MS, FRESH_LAG_SECONDS, raisedExpectation, settledExpectation, SETTLED_LINK_MS, type PendingReplicas, type ReplicaLink } from '../src/storage/redis-connection.js'

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
 * A world of replicas, each reconnecting now and then: a link connects, waits for its sync, is put
 * online (Redis then sets its acknowledgement time, acknowledged or not), and from a moment on
 * acknowledges every second until its replica drops it; it is listed on until the master notices
 * (at once, or `repl-timeout` on for a link left half-open: one dropped before its sync is put
 * online all the same, never acknowledging). The replica's next link connects after the drop.
 * Redis's clock is read in whole seconds, as `INFO` counts `lag`.
 */
interface Link {
  readonly id: number
  readonly connected: number
  readonly online: number
  readonly firstAck: number
  readonly dropped: number
  readonly listedUntil: number
}

type Life = readonly [live: number, sync: number, gap: number, lingers: boolean]

function linksOf(replicas: readonly (readonly Life[])[], start: readonly number[]): Link[] {
  let id = 0
  const links = replicas.flatMap((lives, replica) => {
    let at = start[replica] ?? 0
    return lives.map(([live, sync, gap, lingers]) => {
      const online = at + sync
      const link = { connected: at, online, firstAck: online + 800, dropped: at + live, listedUntil: lingers ? Math.max(at + live, online) + 60_000 : at + live }
      at += live + gap
      return link
    })
  })
  // Client ids count up as links connect.
  return links.sort((a, b) => a.connected - b.connected).map((link) => ({ ...link, id: id++ }))
}

/** What a count at `at` sees: `INFO replication`'s fresh online links, and each with its id, lag and whether it ever acknowledged. */
function countAt(links: readonly Link[], at: number): { fresh: number; seen: ReplicaLink[] } {
  const seconds = (ms: number) => Math.floor(ms / 1000)
  const seen = links
    .filter((link) => link.online <= at && at < link.listedUntil)
    .map((link) => {
      const acked = link.firstAck <= Math.min(at, link.dropped)
      const lastAck = acked ? link.firstAck + 1000 * Math.floor((Math.min(at, link.dropped) - link.firstAck) / 1000) : link.online
      return { id: link.id, lag: seconds(at) - seconds(lastAck), acked }
    })
  return { fresh: seen.filter((link) => link.lag <= FRESH_LAG_SECONDS).length, seen }
}

/** The count expected after counts at `times`, as a sandbox takes them: links read only while more are fresh than expected. */
function expectedWith(links: readonly Link[], times: readonly number[]): number {
  const seen = new Map<number, number>()
  let expected = 0
  for (const at of times) {
    const { fresh, seen: listed } = countAt(links, at)
    if (fresh > Math.max(expected, 1)) expected = settledExpectation(expected, fresh, listed, seen, at)
    else expected = Math.max(expected, Math.min(fresh, 1))
  }
  return expected
}

describe('the replicas a master is expected to have, told apart by how long their links have acknowledged', () => {
  it('never expects more replicas than there are, however often each reconnects, its old links half-open or put online by a sync unacknowledged (attack25 R1, attack27 F1)', () => {
    const life = fc.tuple(fc.integer({ min: 100, max: 8000 }), fc.integer({ min: 0, max: 6000 }), fc.integer({ min: 0, max: 1500 }), fc.boolean())
    fc.assert(
      fc.property(
        fc.array(fc.array(life, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 3 }),
        fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: 3, maxLength: 3 }),
        fc.array(fc.integer({ min: 50, max: 1500 }), { minLength: 1, maxLength: 80 }),
        (replicas, start, gaps) => {
          const links = linksOf(replicas, start)
          let at = 0
          const times = gaps.map((gap) => (at += gap))
          expect(expectedWith(links, times)).toBeLessThanOrEqual(replicas.length)
        },
      ),
    )
  })

  it('expects a replica reconnecting every 1.5 s once, one whose links waiting for a sync were reset once, and each of three steady replicas once they have acknowledged long enough', () => {
    const everySecond = (until: number) => Array.from({ length: until / 250 }, (_, index) => index * 250)
    // attack25 R1: a link every 1.5 s for 30 s, each left half-open (expected 3 before).
    const flapping = linksOf([Array.from({ length: 20 }, () => [1400, 50, 100, true] as const)], [0])
    expect(expectedWith(flapping, everySecond(40_000))).toBe(1)
    // attack27 F1: two links reset while waiting for a 5 s sync, put online with the third (expected 2 before).
    const resetInSync = linksOf([[[1500, 5000, 0, true], [1500, 3500, 0, true], [60_000, 2000, 0, false]]], [0])
    expect(expectedWith(resetInSync, everySecond(20_000))).toBe(1)
    const steady = linksOf([[[60_000, 100, 0, false]], [[60_000, 100, 0, false]], [[60_000, 100, 0, false]]], [0, 700, 1900])
    expect(expectedWith(steady, everySecond(1000))).toBe(1)
    expect(expectedWith(steady, everySecond(1900 + 100 + 800 + SETTLED_LINK_MS + 2000))).toBe(3)
  })

  it('counts a link once it has been seen acknowledging for the settling time, and none that never acknowledged', () => {
    const seen = new Map<number, number>()
    expect(settledExpectation(1, 2, [{ id: 1, lag: 0, acked: true }, { id: 2, lag: 0, acked: true }], seen, 0)).toBe(1)
    expect(settledExpectation(1, 2, [{ id: 1, lag: 0, acked: true }, { id: 2, lag: 1, acked: true }], seen, SETTLED_LINK_MS - 1)).toBe(1)
    expect(settledExpectation(1, 2, [{ id: 1, lag: 0, acked: true }, { id: 2, lag: 1, acked: true }], seen, SETTLED_LINK_MS)).toBe(2)
    const unacked = new Map([[1, 0], [2, 0]])
    expect(settledExpectation(1, 2, [{ id: 1, lag: 0, acked: true }, { id: 2, lag: 0, acked: false }], unacked, 60_000)).toBe(1)
  })
})
