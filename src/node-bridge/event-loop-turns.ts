/**
 * Turns of the event loop for request bodies and, in a rotation of their own ({@link answerTurns}),
 * long answers (an answer's piece weighs an eighth of its length: `ANSWER_BYTES_PER_TURN_BYTE` in
 * http-errors.ts): at most {@link TURN_BYTES} of bodies are decoded
 * (then parsed, weighed and stored in the microtasks that follow) in one turn; past that, each
 * waits for a turn of its own, one at a time (owners in turn, each owner's in the order they
 * ended), so that what arrives
 * meanwhile (a partner's small request) is read and answered between two of them, not after all.
 * @note 200 creates of 1 MiB bodies of many properties, their last bytes sent together, were each
 * handled as its body ended, one after another in the same turn: a partner's list sent after them
 * waited 8.8 s behind them all (attack16 P1: 20-30 s for 1,000). A body's own size was the rule
 * then: 900 bodies just under it (64 KiB) kept a partner waiting 3.8 s (attack22 B1).
 */

/** Bodies up to this many bytes are handled as they end, uncounted: parsing one takes microseconds. */
export const SMALL_BODY_BYTES = 1024

/** How many bytes of bodies are handled in one turn of the event loop before the rest wait for turns of their own. */
export const TURN_BYTES = 64 * 1024

/**
 * A turn that held the event loop this long (ms, with what the loop read meanwhile) is followed by
 * a pause as long, at most {@link MAX_PAUSE_MS}, before the next body's: heavy bodies take at most
 * about half the loop's time, and a request waiting on its store (several round trips) is served
 * in the pause rather than a turn apiece.
 * @note One heavy body a turn, back to back: a partner's request on Redis, each of its round trips
 * waiting a turn (~85 ms of parsing a 1 MiB body of many properties), took 2-3.5 s behind one key's
 * flood, some past the 2 s command timeout: 503, Redis taken for failing (attack23 T2).
 */
export const HEAVY_TURN_MS = 10

/** The longest pause (ms) after a heavy turn. */
export const MAX_PAUSE_MS = 250

/** A body waiting for its turn: given it (true), or let go when its wait ran out (false). */
interface Waiting {
  readonly settle: (turn: boolean) => void
  timer: NodeJS.Timeout | undefined
  settled: boolean
}

/**
 * Gives turns of the event loop to bodies: inline within a turn's bytes, else one at a time, a turn
 * to each group (a client's address) with bodies waiting in rotation, within a group to each owner
 * (a tenant) in rotation, each owner's in the order they ended.
 * @note One queue for all made a partner's create of 2 KB wait behind every body of one key's
 * flood of 1 MiB ones: 2 s behind 30 connections, 10.5 s behind 150 (attack23 T1). By owner
 * alone, one client inventing a key a body (`--any-key`) was as many owners: a partner's create
 * waited behind 245 of 250, 28.5 s (attack25 T1).
 */
export class EventLoopTurns {
  /** Whether a turn that held the loop {@link HEAVY_TURN_MS} or more is followed by a pause (see there). */
  readonly #paced: boolean
  /** The bodies waiting, by group, then by owner; each map's order is its rotation (one served moves to its end). */
  readonly #waiting = new Map<unknown, Map<unknown, Waiting[]>>()
  #count = 0
  #scheduled = false
  /** When the last turn was given ({@link performance.now}), while bodies wait; undefined when none did. */
  #lastTurnAt: number | undefined
  /** Bytes of bodies handled inline in this turn. */
  #bytes = 0
  #resetting = false
  #given = 0

  /** `paced`: whether a heavy turn is followed by a pause before the next (see {@link HEAVY_TURN_MS}); true for bodies. */
  constructor({ paced = true }: { readonly paced?: boolean } = {}) {
    this.#paced = paced
  }

  /**
   * Undefined when a body of `bytes` may be handled now (small, or within this turn's bytes with
   * nobody waiting); else resolves true in a turn of its own (Node's check phase, after the poll
   * phase read what arrived), taken in rotation with `group`'s others and, within it, `owner`'s, or
   * false once it waited `waitMs` without one (then it has no turn: its request is refused,
   * nothing of it handled).
   */
  admit(bytes: number, owner: unknown = undefined, waitMs = Number.POSITIVE_INFINITY, group: unknown = undefined): Promise<boolean> | undefined {
    if (bytes <= SMALL_BODY_BYTES) return undefined
    if (this.#count === 0 && this.#bytes + bytes <= TURN_BYTES) {
      this.#bytes += bytes
      if (!this.#resetting) {
        this.#resetting = true
        setImmediate(this.#reset)
      }
      return undefined
    }
    return new Promise((resolve) => {
      const waiting: Waiting = { settle: resolve, timer: undefined, settled: false }
      if (Number.isFinite(waitMs)) {
        // Let go where it is: its owner's queue drops it when its turn would come.
        waiting.timer = setTimeout(() => {
          waiting.settled = true
          // None left waiting: the queues hold only bodies let go (and their owners: tenants), dropped now.
          if (--this.#count === 0) this.#waiting.clear()
          resolve(false)
        }, Math.max(0, waitMs))
      }
      let owners = this.#waiting.get(group)
      if (owners === undefined) this.#waiting.set(group, (owners = new Map()))
      const queue = owners.get(owner)
      if (queue === undefined) owners.set(owner, [waiting])
      else queue.push(waiting)
      this.#count++
      this.#schedule()
    })
  }

  /** How many wait for a turn. */
  get waiting(): number {
    return this.#count
  }

  /** How many turns were given so far: a turn lasts until the next is given. */
  get given(): number {
    return this.#given
  }

  readonly #reset = (): void => {
    this.#bytes = 0
    this.#resetting = false
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    // An immediate set from within the check phase runs in the next turn, after its poll phase.
    setImmediate(this.#pace)
  }

  /** The next turn now, or after a pause as long as the last one held the loop (see {@link HEAVY_TURN_MS}). */
  readonly #pace = (): void => {
    const held = this.#lastTurnAt === undefined ? 0 : performance.now() - this.#lastTurnAt
    if (!this.#paced || held < HEAVY_TURN_MS) return this.#next()
    setTimeout(this.#next, Math.min(held, MAX_PAUSE_MS))
  }

  readonly #next = (): void => {
    this.#scheduled = false
    this.#lastTurnAt = performance.now()
    const turn = this.#take()
    if (turn !== undefined) {
      clearTimeout(turn.timer)
      this.#given++
      turn.settled = true
      this.#count--
      turn.settle(true)
    }
    if (this.#count > 0) this.#schedule()
    else {
      this.#lastTurnAt = undefined
      // Only bodies let go may be left (and their owners: tenants): dropped.
      this.#waiting.clear()
    }
  }

  /** The next body in rotation still waiting (those let go dropped on the way), its group and owner moved to their rotations' ends. */
  #take(): Waiting | undefined {
    for (const [group, owners] of this.#waiting) {
      this.#waiting.delete(group)
      const turn = takeFrom(owners)
      if (owners.size > 0) this.#waiting.set(group, owners)
      if (turn !== undefined) return turn
    }
    return undefined
  }
}

/** The next body of `owners` in rotation still waiting (those let go dropped), its owner moved to the end; owners left with none removed. */
function takeFrom(owners: Map<unknown, Waiting[]>): Waiting | undefined {
  for (const [owner, queue] of owners) {
    owners.delete(owner)
    let turn = queue.shift()
    while (turn?.settled === true) turn = queue.shift()
    if (queue.length > 0) owners.set(owner, queue)
    if (turn !== undefined) return turn
  }
  return undefined
}

/** The process's turns for request bodies: one event loop, shared by every server in it. */
export const loopTurns = new EventLoopTurns()

/**
 * The process's turns for long answers (`writeInTurns` in http-errors.ts): a rotation of their own,
 * a turn each time round the event loop, not paced: an answer's turn is short (its share of pieces,
 * as the kernel takes them), and the pauses are for bodies' heavy turns.
 * @note In the bodies' rotation, each 64 KiB piece of a partner's long list waited a whole turn and
 * its pause behind another key's ~1 MB bodies (~85 ms of parsing, then as long paused): one piece a
 * body, a 4 MB list 10-57 s where alone under a second (attack77 F1), an 816 KB one 36-49 s behind 40
 * addresses' bodies (attack76 F2).
 */
export const answerTurns = new EventLoopTurns({ paced: false })
