/**
 * How many replicas a Redis master is expected to have, from the links each count sees in `INFO
 * replication` (`settledExpectation`), counts taken as a sandbox takes them: at most a second apart
 * while it writes, once a second while links are not yet expected. The timelines are what `INFO`
 * showed in attack22 S7, attack24 R1-1, attack25 R1, attack27 F1 and attack28 F4.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FRESH_LAG_SECONDS, listedLinks, noReplicaAddresses, settledExpectation, SETTLED_LINK_MS, type ListedLink } from '../src/storage/redis-connection.js'

/**
 * A world of replicas, each reconnecting now and then: a link connects, asks for a sync (`INFO`
 * lists it from then on, after the links that asked before it), is put online once synced (Redis
 * then sets its acknowledgement time, acknowledged or not), and from a moment on acknowledges
 * every second until its replica drops it; it is listed on until the master notices (at once, or
 * `repl-timeout` on for a link left half-open: one dropped before its sync is put online all the
 * same, never acknowledging). The replica's next link connects after the drop, from the next of
 * its addresses (a NAT with several addresses hands them out in turn). `INFO`'s `lag` is in whole seconds.
 */
interface Link {
  readonly address: string
  readonly listed: number
  readonly online: number
  readonly firstAck: number
  readonly dropped: number
  readonly listedUntil: number
}

/** One link of a replica: how long it lives, how long its sync takes, the pause before the next, whether it is left half-open. */
type Life = readonly [live: number, sync: number, gap: number, lingers: boolean]

interface Replica {
  readonly addresses: readonly string[]
  readonly lives: readonly Life[]
  readonly start: number
}

function linksOf(replicas: readonly Replica[]): Link[] {
  return replicas.flatMap(({ addresses, lives, start }) => {
    let at = start
    return lives.map(([live, sync, gap, lingers], index) => {
      const online = at + sync
      const link = { address: addresses[index % addresses.length]!, listed: at, online, firstAck: online + 800, dropped: at + live, listedUntil: lingers ? Math.max(at + live, online) + 60_000 : at + live }
      at += live + gap
      return link
    })
  })
}

/** What `INFO replication` lists at `at`: the links in the order they asked for a sync. */
function infoAt(links: readonly Link[], at: number): ListedLink[] {
  const seconds = (ms: number) => Math.floor(ms / 1000)
  return links
    .filter((link) => link.listed <= at && at < link.listedUntil)
    .sort((a, b) => a.listed - b.listed)
    .map((link) => {
      const acked = link.firstAck <= Math.min(at, link.dropped)
      const lastAck = acked ? link.firstAck + 1000 * Math.floor((Math.min(at, link.dropped) - link.firstAck) / 1000) : link.online
      const online = link.online <= at
      return { address: link.address, offset: acked ? 1000 : 0, lag: online ? seconds(at) - seconds(lastAck) : Number.POSITIVE_INFINITY, counted: online }
    })
}

/** The count expected after counts at `times`, as a sandbox takes them. */
function expectedWith(links: readonly Link[], times: readonly number[], from = 0): number {
  const addresses = noReplicaAddresses()
  let expected = from
  for (const at of times) expected = settledExpectation(expected, infoAt(links, at), addresses, at)
  return expected
}

const everyQuarter = (until: number) => Array.from({ length: until / 250 }, (_, index) => index * 250)
const steady = (address: string, start = 0): Replica => ({ addresses: [address], lives: [[600_000, 100, 0, false]], start })

describe('the replicas a master is expected to have', () => {
  it('never expects more replicas than there are, however often each reconnects, from one address or several in turn, its old links half-open or put online by a sync unacknowledged (attack25 R1, attack27 F1, attack28 F4)', () => {
    const life = fc.tuple(fc.integer({ min: 100, max: 8000 }), fc.integer({ min: 0, max: 6000 }), fc.integer({ min: 0, max: 1500 }), fc.boolean())
    // Addresses drawn from a few, so that replicas share them (one NAT) and a replica has several.
    const replica = fc.record({
      addresses: fc.array(fc.constantFrom('10.0.0.1:6379', '10.0.0.2:6379', '10.0.0.3:6379', '10.0.0.1:6380'), { minLength: 1, maxLength: 3 }),
      lives: fc.array(life, { minLength: 2, maxLength: 12 }),
      start: fc.integer({ min: 0, max: 5000 }),
    })
    fc.assert(
      fc.property(fc.array(replica, { minLength: 1, maxLength: 2 }), fc.array(fc.integer({ min: 50, max: 1500 }), { minLength: 20, maxLength: 80 }), (replicas, gaps) => {
        let at = 0
        const times = gaps.map((gap) => (at += gap))
        expect(expectedWith(linksOf(replicas), times)).toBeLessThanOrEqual(replicas.length)
      }),
      { numRuns: 500 },
    )
  })

  it('expects one replica as soon as one link is fresh, and never lowers the count', () => {
    expect(expectedWith(linksOf([steady('10.0.0.1:6379')]), [900])).toBe(1)
    expect(expectedWith(linksOf([{ addresses: ['10.0.0.1:6379'], lives: [[2000, 100, 0, false]], start: 0 }]), [900, 5000, 9000], 2)).toBe(2)
  })

  it('expects a replica reconnecting every 1.5 s once, one whose links waiting for a sync were reset twice once, and each of three steady replicas once listed long enough', () => {
    // attack25 R1: a link every 1.5 s for 30 s, each left half-open (expected 3 before).
    const flapping = linksOf([{ addresses: ['10.0.0.1:6379'], lives: Array.from({ length: 20 }, () => [1400, 50, 100, true] as const), start: 0 }])
    expect(expectedWith(flapping, everyQuarter(40_000))).toBe(1)
    // The same from two addresses in turn (a NAT with two), and from a new one each time.
    const alternating = linksOf([{ addresses: ['10.0.0.1:6379', '10.0.0.2:6379'], lives: Array.from({ length: 20 }, () => [1400, 50, 100, true] as const), start: 0 }])
    expect(expectedWith(alternating, everyQuarter(40_000))).toBe(1)
    const roaming = linksOf([{ addresses: Array.from({ length: 20 }, (_, index) => `10.0.1.${index}:6379`), lives: Array.from({ length: 20 }, () => [1400, 50, 100, true] as const), start: 0 }])
    expect(expectedWith(roaming, everyQuarter(40_000))).toBe(1)
    // attack27 F1: two links reset while waiting for a 5 s sync, put online with the third (expected 2 before).
    const resetInSync = linksOf([{ addresses: ['10.0.0.1:6379'], lives: [[1500, 5000, 0, true], [1500, 3500, 0, true], [60_000, 2000, 0, false]], start: 0 }])
    expect(expectedWith(resetInSync, everyQuarter(20_000))).toBe(1)
    const three = linksOf([steady('10.0.0.1:6379'), steady('10.0.0.2:6379', 700), steady('10.0.0.3:6379', 1900)])
    expect(expectedWith(three, everyQuarter(1000))).toBe(1)
    expect(expectedWith(three, everyQuarter(1900 + 100 + 800 + SETTLED_LINK_MS + 2000))).toBe(3)
  })

  it('expects two replicas, not three, when one reconnects twice while another stays: the timeline of attack28 F4', () => {
    // R2 attaches, then R1; R2 reconnects 6 s later and 6 s after that, its old links half-open.
    const links = linksOf([
      { addresses: ['127.0.0.1:7002'], lives: [[6300, 100, 0, true], [6000, 100, 0, true], [600_000, 100, 0, false]], start: 0 },
      steady('127.0.0.1:7001', 300),
    ])
    expect(expectedWith(links, everyQuarter(12_000 + 30_000))).toBe(2)
  })

  it('expects replicas behind one NAT address as one: links at one address cannot be told apart (attack22 S1, attack29 F1)', () => {
    const nat = linksOf([steady('10.9.9.9:6379'), steady('10.9.9.9:6379', 1200)])
    expect(expectedWith(nat, everyQuarter(1200 + 100 + 800 + SETTLED_LINK_MS + 1000))).toBe(1)
  })

  it('expects one replica whose link is cut now and then, the old one half-open until the next cut, one leaving as one comes between two counts (attack29 F1)', () => {
    // Each link lives 5 s and lingers half-open until the next one's end (the master's repl-timeout as long as the flap).
    const lives = Array.from({ length: 8 }, () => [5000, 100, 0, false] as const)
    const links = linksOf([{ addresses: ['10.0.0.1:6379'], lives, start: 0 }]).map((link, index, all) => ({ ...link, listedUntil: all[index + 1]?.dropped ?? link.dropped }))
    expect(expectedWith(links, everyQuarter(40_000).filter((at) => at % 1000 === 500))).toBe(1)
  })

  it('expects a newcomer while another replica stalls now and then: stale at some counts, listed at all (attack24 R1-1)', () => {
    const addresses = noReplicaAddresses()
    let expected = 1
    for (let second = 0; second < 12; second++) {
      const stalled = second % 3 !== 0
      const info: ListedLink[] = [
        { address: '10.0.0.1:6379', offset: 1000, lag: stalled ? FRESH_LAG_SECONDS + 1 : 0, counted: true },
        { address: '10.0.0.2:6379', offset: 1000, lag: 0, counted: true },
      ]
      expected = settledExpectation(expected, info, addresses, second * 1000)
    }
    expect(expected).toBe(2)
  })

  it('counts a link once its address has been listed for the settling time with no link added, and none that never acknowledged', () => {
    const link = (address: string, offset = 1000): ListedLink => ({ address, offset, lag: 0, counted: true })
    const addresses = noReplicaAddresses()
    expect(settledExpectation(1, [link('a:1'), link('b:1')], addresses, 0)).toBe(1)
    expect(settledExpectation(1, [link('a:1'), link('b:1')], addresses, SETTLED_LINK_MS - 1)).toBe(1)
    expect(settledExpectation(1, [link('a:1'), link('b:1')], addresses, SETTLED_LINK_MS)).toBe(2)
    // A link added at b (listed after a, where b's old one was before it): b is new again.
    expect(settledExpectation(1, [link('a:1'), link('b:1')], noReplicaAddresses(), 0)).toBe(1)
    const turned = noReplicaAddresses()
    settledExpectation(1, [link('b:1'), link('a:1')], turned, 0)
    expect(settledExpectation(1, [link('a:1'), link('b:1')], turned, SETTLED_LINK_MS)).toBe(1)
    expect(settledExpectation(1, [link('a:1'), link('b:1')], turned, 2 * SETTLED_LINK_MS)).toBe(2)
    const unacked = noReplicaAddresses()
    settledExpectation(1, [link('a:1'), link('b:1', 0)], unacked, 0)
    expect(settledExpectation(1, [link('a:1'), link('b:1', 0)], unacked, 60_000)).toBe(1)
  })
})

describe('the replica links INFO replication lists', () => {
  it('counts a link Redis 7 lists with lag=-1 (acknowledged within the second) as fresh, not missing (attack28 F8)', () => {
    const info = [
      '# Replication',
      'role:master',
      'connected_slaves:3',
      'slave0:ip=10.0.0.1,port=6379,state=online,offset=1000,lag=-1',
      'slave1:ip=10.0.0.2,port=6379,state=online,offset=990,lag=2',
      'slave2:ip=10.0.0.3,port=6379,state=wait_bgsave,offset=0,lag=0',
      'slave3:ip=10.0.0.4,port=0,state=online,offset=1000,lag=0',
    ].join('\r\n')
    expect(listedLinks(info)).toEqual([
      { address: '10.0.0.1:6379', offset: 1000, lag: 0, counted: true },
      { address: '10.0.0.2:6379', offset: 990, lag: 2, counted: true },
      { address: '10.0.0.3:6379', offset: 0, lag: 0, counted: false },
      { address: '10.0.0.4:0', offset: 1000, lag: 0, counted: false },
    ])
  })
})
