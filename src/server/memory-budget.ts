/**
 * One memory budget across all tenants: what the tenants hold (their data and journals, as
 * estimated by the core) against a byte budget, and V8's heap against its limit as a backstop.
 * Over either, the server refuses new tenants and new state (503 `over_capacity`,
 * `Retry-After`); long answers being sent count beside the tenants, each against the tenant it
 * is for, and a long read that would not fit beside them is refused only when its own tenant's
 * reads and answers take more than that tenant's share; near the heap limit it refuses all API
 * work, so that it answers instead of dying.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { OverCapacityError, RETRY_AFTER_SECONDS, type Work } from '../core/capacity.js'
import { monotonicNow } from '../core/clock.js'
import type { AnswerProgress } from '../node-bridge/http-errors.js'

/** Options of {@link MemoryBudget}. */
export interface MemoryBudgetOptions {
  /** Bytes the tenants may hold together. */
  readonly budgetBytes: number
  /** What the tenants hold now, in bytes. */
  readonly heldBytes: () => number
  /**
   * Above this share of V8's heap limit in use, new state is refused; above {@link CRITICAL_HEAP_SHARE}
   * every API request is.
   * @default 0.75
   */
  readonly heapShare?: number | undefined
  /**
   * Makes room when the tenants hold more than the budget, before anything is refused: drops what
   * can go without loss (tenants still on their seed), least recently used first; returns how
   * many things it dropped. After a call that dropped nothing, not called again for
   * {@link RELIEF_INTERVAL_MS}. `room`: bytes to leave free under the budget (the growth asked for). @default nothing is dropped
   */
  readonly relieve?: ((room: number) => number) | undefined
  /** V8's heap figures (a test passes its own). @default v8.getHeapStatistics */
  readonly heap?: (() => { used_heap_size: number; heap_size_limit: number }) | undefined
  /**
   * A full garbage collection, run before work is refused on the heap's figure (at most every
   * {@link COLLECT_INTERVAL_MS}), so that garbage is not counted as held. @default V8's own (`gc`,
   * exposed at run time), or none where it cannot be
   */
  readonly collect?: (() => void) | undefined
}

/** At most this often (ms), a full collection runs before a refusal on the heap's figure. */
export const COLLECT_INTERVAL_MS = 5000

let v8Collect: (() => void) | null | undefined
/** V8's full collection, exposed at run time (`--expose-gc`, read in a new context); undefined where it cannot be. */
function v8Collection(): (() => void) | undefined {
  if (v8Collect === undefined) {
    try {
      setFlagsFromString('--expose-gc')
      v8Collect = runInNewContext('gc') as () => void
    } catch {
      v8Collect = null
    }
  }
  return v8Collect ?? undefined
}

/**
 * An answer whose connection has taken nothing for this long, in ms, is stalled: a long read
 * that would be refused cuts other tenants' stalled answers first ({@link MemoryBudget.reserveRead}).
 * @note "Taken" is what the kernel accepted. A client reading slowly empties its socket buffers
 * (megabytes on loopback) long before the server sees it: Linux reopens the window in steps of
 * about 1.5 MB, 8 to 28 s apart for a client reading 16 KB every 300 ms (measured, Node 20 to
 * 24). So an answer that took something again after a pause has shown its client reads, and
 * is never cut by this rule: only by the request timeout (`AnswerSending.stallMs`).
 * @default 2000
 */
export const STALL_MS = 2000
/** How often held answers' progress is looked at, in ms. */
const SAMPLE_MS = STALL_MS / 4

/** An answer being sent, as {@link MemoryBudget.holdAnswer} counts it. */
interface HeldAnswer {
  readonly tenant: string
  readonly bytes: number
  readonly progress: AnswerProgress
  readonly release: () => void
  /** What the connection had taken when last looked at, and since when. */
  taken: number
  since: number
  /** Whether it has taken nothing for a while since it last took something (its buffers filled). */
  paused: boolean
  /** Whether it took something again after a pause: its client reads, however slowly. */
  reading: boolean
}

/** Why a long read is refused while the tenant's own answers being sent take its share of the budget. */
const ANSWERS_REASON = 'answers being sent to this tenant take its share of the memory the operator allowed'
/** Why a long read is refused while what the tenants hold and every answer being sent take twice the budget. */
const CEILING_REASON = 'answers being sent hold all the memory the operator allowed'
/**
 * Past the budget, tenants' long reads are let through (each within its share) only while what
 * the tenants hold and the answers in flight take less than this many budgets.
 * @default 2
 */
export const ANSWER_CEILING_BUDGETS = 2
/**
 * Reads that may take at most this many bytes are not reserved ({@link MemoryBudget.reserveRead}).
 * @default 65536
 */
export const SMALL_READ_BYTES = 64 * 1024
const NOTHING_HELD = () => undefined
/** Above this share of the heap limit in use, even reads are refused. */
export const CRITICAL_HEAP_SHARE = 0.9
/** How long one reading of the heap is trusted, in ms (reading it costs a few µs). */
const HEAP_SAMPLE_MS = 100
/** While over the budget with nothing to drop, room is looked for again at most this often (each look visits every tenant). */
export const RELIEF_INTERVAL_MS = 100

/**
 * The default budget: half of V8's heap limit, so that what the tenants hold plus the server's
 * own working memory stays below it.
 * @default half of `v8.getHeapStatistics().heap_size_limit` (about 2 GiB with Node 20's default on a 24 GiB machine)
 */
export function defaultMemoryBudget(): number {
  return Math.floor(getHeapStatistics().heap_size_limit / 2)
}

/**
 * Judges whether the server has room for work: what the tenants hold against the budget, and
 * V8's heap against its limit.
 * @example new MemoryBudget({ budgetBytes: 2 ** 30, heldBytes: () => registry.heldBytes() }).admit('grow')
 */
export class MemoryBudget {
  readonly #options: MemoryBudgetOptions
  readonly #heap: () => { used_heap_size: number; heap_size_limit: number }
  #sampledAt = Number.NEGATIVE_INFINITY
  #heapShare = 0
  /** When a full collection last ran before a refusal ({@link #usedHeapShare}). */
  #collectedAt = Number.NEGATIVE_INFINITY
  #refusals = 0
  /** When a relief last dropped nothing. */
  #fruitlessAt = Number.NEGATIVE_INFINITY
  /** Bytes of the answers being sent and the reads under way ({@link holdAnswer}, {@link reserveRead}). */
  #answerBytes = 0
  /** The same bytes by tenant (only tenants with something in flight). */
  readonly #answerBytesOf = new Map<string, number>()
  /** The answers held with a way to see their progress and cut them. */
  readonly #answers = new Set<HeldAnswer>()
  #sampler: ReturnType<typeof setInterval> | undefined

  constructor(options: MemoryBudgetOptions) {
    this.#options = options
    this.#heap = options.heap ?? getHeapStatistics
  }

  /**
   * Throws {@link OverCapacityError} when there is no room for `work`; `growth`: what it adds to
   * what the tenants hold, when known (a switch to a scenario: its seed's weight less what the
   * tenant holds now). Growth under 0 gives memory back: refused only near the heap's limit.
   */
  admit(work: Work, growth = 0): void {
    const reason = this.refusal(work, growth)
    if (reason === undefined) return
    this.#refusals++
    throw new OverCapacityError(reason, RETRY_AFTER_SECONDS)
  }

  /**
   * Why `work` would be refused now, or undefined when there is room. New state is judged by what
   * the tenants hold; reads only near the heap limit (a long read made per request reserves its
   * room itself: {@link reserveRead}).
   * @note Answers being sent do not refuse new state: they are let go within the request timeout,
   * and counting them here let one partner's downloads lock every partner's creates out.
   */
  refusal(work: Work, growth = 0): string | undefined {
    const share = this.#usedHeapShare()
    if (share > CRITICAL_HEAP_SHARE) return 'the server is close to its memory limit'
    // @note A switch to a smaller state is let in past the budget: refused, a tenant that held too much could never
    // give it back, and with it every other tenant stayed refused (attack42 F3).
    if (work === 'read' || growth < 0) return undefined
    if (share > (this.#options.heapShare ?? 0.75)) return 'the server is close to its memory limit'
    // @note With its growth: judged by what the tenants held before it, one switch to a scenario of 100,000 generated
    // categories was let into a 64 MiB budget, and left every tenant refused (attack42 F3).
    if (this.#options.heldBytes() + growth > this.#options.budgetBytes && !this.#relieved(growth, growth)) return 'the tenants hold all the memory the operator allowed'
    return undefined
  }

  /**
   * Counts `bytes` of an answer being sent to `tenant` (its id) against the budget until the
   * function returned is called (once it is written out, or its connection is gone); calling it
   * again does nothing.
   * @note Answers are counted once made, not refused: the request's outcome (a create's) is
   * already decided and journaled. That tenant's reads arriving while its answers take its share
   * are refused instead.
   * With `progress`, an answer whose connection takes nothing for {@link STALL_MS}, and never
   * took anything again after a pause, may be cut (its bytes released at once) to let another
   * tenant's long read through.
   * @example const release = budget.holdAnswer(Buffer.byteLength(body), tenantId); res.once('close', release)
   */
  holdAnswer(bytes: number, tenant: string, progress?: AnswerProgress): () => void {
    this.#count(tenant, bytes)
    let held = true
    const release = () => {
      if (!held) return
      held = false
      this.#count(tenant, -bytes)
      if (answer !== undefined && this.#answers.delete(answer) && this.#answers.size === 0) clearInterval(this.#sampler)
    }
    const answer: HeldAnswer | undefined =
      progress === undefined
        ? undefined
        : { tenant, bytes, progress, release, taken: progress.taken(), since: monotonicNow(), paused: false, reading: false }
    if (answer !== undefined) {
      // @note Looked at every quarter of STALL_MS: looked at only when a read is judged, an
      // answer that had taken its socket's buffers since would seem busy just then.
      if (this.#answers.size === 0) this.#sampler = setInterval(() => this.#sample(), SAMPLE_MS).unref()
      this.#answers.add(answer)
    }
    return release
  }

  /**
   * Reserves `bytes` a read for `tenant` (its id) is about to take (a list made per request) until
   * the function returned is called. Let through when it fits beside what the tenants hold and
   * every read and answer under way; past that, when `tenant` has nothing in flight (so that a
   * list larger than the whole budget can still be read, one at a time, and a tenant is never
   * refused for another's answers) or its reads and answers stay within its share (the room the
   * tenants' data leaves in the budget, split between the tenants with something in flight), as long as what the tenants hold and
   * every answer in flight take less than {@link ANSWER_CEILING_BUDGETS} budgets. Otherwise
   * throws {@link OverCapacityError}. A read of at most {@link SMALL_READ_BYTES} is neither
   * counted nor refused (as small answers are not), so that partners with short lists are never
   * refused for another's long ones.
   * @note A refusal judged on all tenants' answers alone let one key's stalled downloads lock
   * every partner's long lists out for the request timeout, again and again (issue 20 G4).
   */
  reserveRead(bytes: number, tenant: string): () => void {
    if (bytes <= SMALL_READ_BYTES) return NOTHING_HELD
    let refusal = this.#readRefusal(bytes, tenant)
    // @note Other tenants' stalled answers are cut, idle longest first, as many as the read needs
    // and none when cutting them all would not make room: 28 keys each stalling one long read
    // held a partner's long list out for good (attack4 H7).
    if (refusal !== undefined) {
      const cut = this.#stalledToCut(bytes, tenant)
      for (const answer of cut) {
        answer.release()
        answer.progress.cut()
      }
      if (cut.length > 0) refusal = this.#readRefusal(bytes, tenant)
    }
    if (refusal !== undefined) {
      this.#refusals++
      throw new OverCapacityError(refusal, RETRY_AFTER_SECONDS)
    }
    return this.holdAnswer(bytes, tenant)
  }

  /** Notes which held answers' connections took something since last looked at; returns now. */
  #sample(): number {
    const now = monotonicNow()
    for (const answer of this.#answers) {
      const taken = answer.progress.taken()
      // @note A pause is half a look's interval without progress, so that a look made by a read
      // just after the connection took something (its buffers filling) does not count as one.
      if (taken === answer.taken) {
        if (now - answer.since >= SAMPLE_MS / 2) answer.paused = true
        continue
      }
      if (answer.paused) answer.reading = true
      answer.taken = taken
      answer.since = now
    }
    return now
  }

  /**
   * The answers to cut so that a read of `bytes` for `tenant` fits: those of other tenants that
   * took nothing for {@link STALL_MS} and never showed their client reads, idle longest first,
   * the fewest that make room; none when all of them would not, or when `tenant` has a stalled
   * answer of its own (then it is the one holding memory nobody reads).
   */
  #stalledToCut(bytes: number, tenant: string): HeldAnswer[] {
    const now = this.#sample()
    const stalled = [...this.#answers].filter((answer) => !answer.reading && now - answer.since >= STALL_MS)
    if (stalled.some((answer) => answer.tenant === tenant)) return []
    const others = stalled.sort((a, b) => a.since - b.since)
    const freed = new Map<string, number>()
    for (const [index, answer] of others.entries()) {
      freed.set(answer.tenant, (freed.get(answer.tenant) ?? 0) + answer.bytes)
      if (this.#readRefusal(bytes, tenant, freed) === undefined) return others.slice(0, index + 1)
    }
    return []
  }

  /**
   * Why a read of `bytes` for `tenant` is refused now ({@link reserveRead}), or undefined; with
   * `freed`, as if those bytes of answers (by tenant) were let go.
   */
  #readRefusal(bytes: number, tenant: string, freed?: ReadonlyMap<string, number>): string | undefined {
    const budget = this.#options.budgetBytes
    let inFlight = this.#answerBytes
    let tenantsInFlight = this.#answerBytesOf.size
    for (const [id, gone] of freed ?? []) {
      inFlight -= gone
      if (gone >= (this.#answerBytesOf.get(id) ?? 0)) tenantsInFlight--
    }
    if (inFlight === 0) return undefined
    const held = this.#options.heldBytes()
    if (held + inFlight + bytes <= budget || this.#relieved(inFlight + bytes)) return undefined
    // Relief may have dropped tenants: what they hold is read again.
    const heldNow = this.#options.heldBytes()
    if (heldNow + inFlight >= ANSWER_CEILING_BUDGETS * budget) return CEILING_REASON
    const own = (this.#answerBytesOf.get(tenant) ?? 0) - (freed?.get(tenant) ?? 0)
    if (own === 0) return undefined
    // The tenants with something in flight share the room the tenants' data leaves; this one is among them.
    const share = Math.max(0, budget - heldNow) / tenantsInFlight
    return own + bytes <= share ? undefined : ANSWERS_REASON
  }

  #count(tenant: string, bytes: number): void {
    this.#answerBytes += bytes
    const now = (this.#answerBytesOf.get(tenant) ?? 0) + bytes
    if (now === 0) this.#answerBytesOf.delete(tenant)
    else this.#answerBytesOf.set(tenant, now)
  }

  /** Bytes of the answers being sent now, as counted by {@link holdAnswer}. */
  get answerBytes(): number {
    return this.#answerBytes
  }

  /**
   * Whether dropping what can go without loss (until `room` is free under the budget) brought the tenants (with
   * `more` beside them) within the budget.
   */
  #relieved(more = 0, room = 0): boolean {
    const relieve = this.#options.relieve
    const now = monotonicNow()
    if (relieve === undefined || now - this.#fruitlessAt < RELIEF_INTERVAL_MS) return false
    if (relieve(room) === 0) this.#fruitlessAt = now
    return this.#options.heldBytes() + more <= this.#options.budgetBytes
  }

  /** How many requests were refused since start. */
  get refusals(): number {
    return this.#refusals
  }

  /**
   * The share of V8's heap limit in use; above the share that refuses new state, after a full
   * collection (at most every {@link COLLECT_INTERVAL_MS}).
   * @note The heap's figure counts garbage: with every request refused nothing allocates, V8
   * never collects, and the figure never falls. Answers let go (25 unread lists of one key) kept
   * every partner refused 503 for minutes after the key had gone, health ok (attack14 M1).
   */
  #usedHeapShare(): number {
    const now = performance.now()
    if (now - this.#sampledAt > HEAP_SAMPLE_MS) {
      this.#heapShare = this.#readHeap()
      this.#sampledAt = now
      if (this.#heapShare > Math.min(this.#options.heapShare ?? 0.75, CRITICAL_HEAP_SHARE) && now - this.#collectedAt >= COLLECT_INTERVAL_MS) {
        this.#collectedAt = now
        const collect = this.#options.collect ?? v8Collection()
        if (collect !== undefined) {
          collect()
          this.#heapShare = this.#readHeap()
        }
      }
    }
    return this.#heapShare
  }

  #readHeap(): number {
    const heap = this.#heap()
    return heap.used_heap_size / heap.heap_size_limit
  }
}
