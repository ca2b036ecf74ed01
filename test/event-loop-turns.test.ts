/**
 * The event loop's turns for large request bodies (`EventLoopTurns`), with bodies whose handling
 * holds the loop (parsing 1 MiB of many properties takes ~85 ms), and a request that waits on its
 * store: round trips over a real TCP connection, as a Redis command's.
 */
import { createServer, connect, type Socket } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { EventLoopTurns } from '../src/node-bridge/event-loop-turns.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** Holds the thread for `ms`, as parsing a large body does. */
function hold(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // busy
  }
}

/** A connection to an echo server on loopback, and a round trip on it. */
async function echo(): Promise<(payload: string) => Promise<void>> {
  const server = createServer((socket) => socket.pipe(socket))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const socket: Socket = connect((server.address() as { port: number }).port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  onTestFinished(() => {
    socket.destroy()
    server.close()
  })
  return (payload) =>
    new Promise<void>((resolve) => {
      socket.once('data', () => resolve())
      socket.write(payload)
    })
}

describe('turns for large bodies', () => {
  it('lets a request make its round trips between heavy bodies, not one round trip a body (attack23 T2)', async () => {
    const turns = new EventLoopTurns()
    const roundTrip = await echo()
    let handled = 0
    // 40 heavy bodies of one tenant, each holding the loop 30 ms once its turn comes.
    const bodies = Array.from({ length: 40 }, () =>
      turns.admit(1024 * 1024, 'flood')!.then(() => {
        hold(30)
        handled++
      }),
    )
    await new Promise((resolve) => setTimeout(resolve, 100))
    // A partner's request on Redis: 10 round trips one after the other.
    const before = handled
    for (let trip = 0; trip < 10; trip++) await roundTrip(`trip ${trip}`)
    const during = handled - before
    await Promise.all(bodies)
    // Before: a body's turn between every two round trips (10 or more).
    expect(during).toBeLessThanOrEqual(4)
  })

  it('takes one body of each owner in turn, each owner’s in the order they came (attack23 T1)', async () => {
    const turns = new EventLoopTurns()
    const order: string[] = []
    const admitted = [
      ...['a1', 'a2', 'a3'].map((name) => turns.admit(100_000, 'a')!.then(() => order.push(name))),
      ...['b1', 'b2'].map((name) => turns.admit(100_000, 'b')!.then(() => order.push(name))),
      turns.admit(100_000, 'c')!.then(() => order.push('c1')),
    ]
    await Promise.all(admitted)
    expect(order).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3'])
  })

  it('takes one body of each client address in turn, however many owners one client brings (attack25 T1)', async () => {
    const turns = new EventLoopTurns()
    const order: string[] = []
    // One client inventing a key a body (--any-key): twelve owners at one address.
    const crowd = Array.from({ length: 12 }, (_, index) => turns.admit(100_000, `key ${index}`, undefined, '10.0.0.1')!.then(() => order.push(`crowd ${index}`)))
    const partner = turns.admit(100_000, 'partner', undefined, '10.0.0.2')!.then(() => order.push('partner'))
    await Promise.all([...crowd, partner])
    // Before (turns by owner only): partner 13th, after every key of the crowd.
    expect(order.indexOf('partner')).toBe(1)
    expect(order.filter((name) => name !== 'partner')).toEqual(Array.from({ length: 12 }, (_, index) => `crowd ${index}`))
  })

  it('lets go of a body that waited its time without a turn, and gives the next owner its turn as before', async () => {
    const turns = new EventLoopTurns()
    const order: string[] = []
    // a1 holds the loop 120 ms: a pause as long (at most MAX_PAUSE_MS) follows before b1's turn.
    const a1 = turns.admit(100_000, 'a')!.then((given) => {
      hold(120)
      order.push(`a1 ${given}`)
    })
    const b1 = turns.admit(100_000, 'b', 60)!.then((given) => order.push(`b1 ${given}`))
    const c1 = turns.admit(100_000, 'c', 10_000)!.then((given) => order.push(`c1 ${given}`))
    await Promise.all([a1, b1, c1])
    // Before: no wait was bounded (b1 true, after a1).
    expect(order).toEqual(['a1 true', 'b1 false', 'c1 true'])
    expect(turns.waiting).toBe(0)
  })

  it('holds no owner of a body let go once none waits (an owner is a tenant: kept, it could never be collected)', async () => {
    const turns = new EventLoopTurns()
    // a1 holds the loop; x1 (last in the rotation) is let go meanwhile; b1's turn then leaves none waiting.
    const a1 = turns.admit(100_000, 'a')!.then(() => hold(80))
    const b1 = turns.admit(100_000, 'b')!
    const { x1, held } = (() => {
      const owner = { tenant: 'gone' }
      return { x1: turns.admit(100_000, owner, 20)!, held: new WeakRef(owner) }
    })()
    expect(await Promise.all([a1, b1, x1])).toEqual([undefined, true, false])
    expect(turns.waiting).toBe(0)
    await new Promise((resolve) => setTimeout(resolve, 50))
    gc()
    // Before: x1's owner stayed in the rotation (its queue never visited again).
    expect(held.deref()).toBeUndefined()
  })

  it('handles a small body at once, and a large one at once while the turn has room and nobody waits', () => {
    const turns = new EventLoopTurns()
    expect(turns.admit(1024, 'a')).toBeUndefined()
    expect(turns.admit(60_000, 'a')).toBeUndefined()
    expect(turns.admit(60_000, 'a')).toBeInstanceOf(Promise)
    expect(turns.waiting).toBe(1)
  })
})
