/**
 * Turns of the event loop, one caller at a time: work that holds the one thread for long (a large
 * request body decoded, then parsed, weighed and stored in the microtasks that follow) waits for a
 * turn of its own, so that what arrives
 * meanwhile (a partner's small request) is read and answered between two such pieces of work,
 * not after all of them.
 * @note 200 creates of 1 MiB bodies of many properties, their last bytes sent together, were each
 * handled as its body ended, one after another in the same turn: a partner's list sent after them
 * waited 8.8 s behind them all (attack16 P1: 20-30 s for 1,000).
 */

/** Bodies longer than this (bytes) are heavy work: decoding and parsing one of many properties takes milliseconds. */
export const HEAVY_BODY_BYTES = 64 * 1024

/** Gives turns of the event loop one at a time, in the order they were asked for. */
export class EventLoopTurns {
  readonly #waiting: (() => void)[] = []
  #scheduled = false

  /**
   * Resolves in a turn of the event loop of its own (Node's check phase, after the poll phase read
   * what arrived): one waiter a turn, first come first served.
   */
  readonly take = (): Promise<void> =>
    new Promise((resolve) => {
      this.#waiting.push(resolve)
      this.#schedule()
    })

  /** How many wait for a turn. */
  get waiting(): number {
    return this.#waiting.length
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    // An immediate set from within the check phase runs in the next turn, after its poll phase.
    setImmediate(this.#next)
  }

  readonly #next = (): void => {
    this.#scheduled = false
    this.#waiting.shift()?.()
    if (this.#waiting.length > 0) this.#schedule()
  }
}

/** The process's turns for heavy request bodies: one event loop, shared by every server in it. */
export const heavyBodyTurns = new EventLoopTurns()
