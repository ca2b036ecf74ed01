/**
 * Planned answers: a tenant's queue of answers a test (or a partner's QA suite) asked for, such
 * as "the next 2 `listCategories` answer 401". The pipeline takes one for each request that
 * reached the tenant, before `Prefer` and faults (docs/decisions/0013-planned-answers.md). One
 * JSON shape for the library (`petstore.answers.next()`) and the admin API
 * (`POST /__sandbox/answers`), judged here.
 */
import { codesForStatus, ERROR_TABLE, type ErrorCode } from '../contract/errors.js'
import { answerableStatuses, contractOf, OPERATION_CONTRACTS, type OperationId } from '../contract/operations.js'

/**
 * What a test plans for the next request(s) of one operation: an error status (the contract's
 * Error body, from the error table), a dropped connection, a delay, or a delay and a status.
 * @example { operation: 'listCategories', status: 401, times: 2 }
 */
export interface AnswerPlan {
  /** The operation whose next request(s) get this answer. */
  readonly operation: OperationId
  /** A status the operation declares (as `Prefer: code=` accepts); its own success status answers normally. */
  readonly status?: number | undefined
  /** Which error code of that status, when it has several (401: `invalid_api_key` or `missing_api_key`). @default the table's first for the status */
  readonly code?: ErrorCode | undefined
  /** Drop the connection instead of answering (`fetch` rejects). Not with `status` or `code`. */
  readonly network?: true | undefined
  /** Wait this long before answering (or dropping), in ms, up to the runtime's longest delay. */
  readonly delayMs?: number | undefined
  /** How many requests of the operation get it. @default 1 */
  readonly times?: number | undefined
}

/** A planned answer as the queue keeps it: judged, with its code resolved. */
export interface PlannedAnswer {
  readonly operation: OperationId
  readonly status?: number
  readonly code?: ErrorCode
  readonly network?: true
  readonly delayMs?: number
}

/**
 * A planned answer not used up yet: `times` is how many requests it still answers.
 * @example petstore.answers.pending() // [{ operation: 'listCategories', status: 401, code: 'invalid_api_key', times: 1 }]
 */
export interface PendingAnswer extends PlannedAnswer {
  readonly times: number
}

/** The most answers one plan may cover (`times`). */
export const MAX_ANSWER_TIMES = 1000

/** The most plans one tenant may hold at once (each with its `times`): bounds what a client can make the sandbox hold. */
export const MAX_PLANNED_ANSWERS = 100

const FIELDS = ['operation', 'status', 'code', 'network', 'delayMs', 'times'] as const
const OPERATION_IDS: readonly string[] = OPERATION_CONTRACTS.map((contract) => contract.id)

export type PlanJudgement = { readonly ok: true; readonly value: PendingAnswer } | { readonly ok: false; readonly reason: string }

/**
 * A refused value as a message quotes it: a string whole (up to 200 characters), an object or
 * array by its first 60 characters of JSON.
 * @note A field nested 300,000 deep overflowed JSON.stringify's stack: 500 where the refusal is a
 * 400 (attack16 J1).
 */
const show = (value: unknown): string => {
  if (typeof value === 'string') return value.length > 200 ? `${JSON.stringify(value.slice(0, 200))}…` : JSON.stringify(value)
  if (typeof value !== 'object') return String(value)
  try {
    return JSON.stringify(value)?.slice(0, 60) ?? 'undefined'
  } catch {
    return Array.isArray(value) ? 'an array nested too deeply to show' : 'an object nested too deeply to show'
  }
}

/**
 * Judges a plan as given (from a test or a request body): every field known, the operation one
 * of the contract's, the status one it may answer, the code one of that status, `times` a whole
 * number from 1 to {@link MAX_ANSWER_TIMES}, `delayMs` from 0 to `maxDelayMs`. The reason of a
 * refusal names what is allowed.
 */
export function judgeAnswerPlan(input: unknown, maxDelayMs: number): PlanJudgement {
  const refuse = (reason: string): PlanJudgement => ({ ok: false, reason })
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return refuse(`a planned answer is an object such as { "operation": "listCategories", "status": 401 }, got ${Array.isArray(input) ? 'an array' : show(input)}`)
  }
  const plan = input as Record<string, unknown>
  const unknown = Object.keys(plan).find((key) => !(FIELDS as readonly string[]).includes(key))
  if (unknown !== undefined) return refuse(`${JSON.stringify(unknown)} is not a field of a planned answer; fields: ${FIELDS.join(', ')}`)
  const { operation, status, code, network, delayMs, times } = plan
  if (typeof operation !== 'string' || !OPERATION_IDS.includes(operation)) {
    return refuse(`operation must be an operation name (${OPERATION_IDS.join(', ')}), got ${show(operation)}`)
  }
  const contract = contractOf(operation as OperationId)
  const statuses = answerableStatuses(contract)
  const value: { -readonly [K in keyof PendingAnswer]: PendingAnswer[K] } = { operation: contract.id, times: 1 }
  if (times !== undefined) {
    if (!Number.isInteger(times) || (times as number) < 1 || (times as number) > MAX_ANSWER_TIMES) {
      return refuse(`times must be a whole number from 1 to ${MAX_ANSWER_TIMES}, got ${show(times)}`)
    }
    value.times = times as number
  }
  if (delayMs !== undefined) {
    if (!Number.isInteger(delayMs) || (delayMs as number) < 0 || (delayMs as number) > maxDelayMs) {
      return refuse(`delayMs must be a whole number of milliseconds from 0 to ${maxDelayMs}, got ${show(delayMs)}`)
    }
    value.delayMs = delayMs as number
  }
  if (network !== undefined) {
    if (network !== true) return refuse(`network must be true (drop the connection), got ${show(network)}`)
    if (status !== undefined || code !== undefined) return refuse('network drops the connection: it cannot go with status or code')
    value.network = true
  }
  if (typeof status === 'string' && /^\d+$/.test(status)) {
    return refuse(`status must be an HTTP status as a number (${status}, not ${show(status)}); ${contract.id} answers ${statuses.join(', ')}`)
  }
  if (status !== undefined && (typeof status !== 'number' || !statuses.includes(status))) {
    return refuse(`status ${show(status)} is not an outcome of ${contract.method} ${contract.path} (${contract.id}); use one of ${statuses.join(', ')}`)
  }
  if (code !== undefined) {
    const codes = statuses.flatMap((allowed) => codesForStatus(allowed))
    if (typeof code !== 'string' || !(codes as string[]).includes(code)) {
      return refuse(`code ${show(code)} is not an error code ${contract.id} answers; use one of ${codes.join(', ')}`)
    }
    const codeStatus = ERROR_TABLE[code as ErrorCode].status
    if (status !== undefined && codeStatus !== status) {
      return refuse(`code ${JSON.stringify(code)} is a ${codeStatus}, not a ${String(status)}; codes of ${String(status)}: ${codesForStatus(status).join(', ') || 'none (it is the success status)'}`)
    }
    value.status = codeStatus
    value.code = code as ErrorCode
  } else if (status !== undefined) {
    value.status = status
    if (status !== contract.success.status) value.code = codesForStatus(status)[0]
  }
  if (value.status === undefined && value.network === undefined && value.delayMs === undefined) {
    return refuse('a planned answer needs status, code, network or delayMs (what should the answer be?)')
  }
  return { ok: true, value: ordered(value) }
}

/** The fields in one order, whatever order they were given in (pending answers read alike everywhere). */
function ordered(answer: PendingAnswer): PendingAnswer {
  const { operation, status, code, network, delayMs, times } = answer
  return {
    operation,
    ...(status === undefined ? {} : { status }),
    ...(code === undefined ? {} : { code }),
    ...(network === undefined ? {} : { network }),
    ...(delayMs === undefined ? {} : { delayMs }),
    times,
  }
}

/** Refused: the tenant holds {@link MAX_PLANNED_ANSWERS} plans already. */
export class AnswerLimitError extends Error {
  override readonly name = 'AnswerLimitError'
  constructor(readonly limit: number) {
    super(`the tenant holds the most planned answers allowed (${limit})`)
  }
}

/** A tenant's planned answers: in this process ({@link AnswerQueue}), or in a shared store (Redis). */
export interface TenantAnswers {
  /** Adds a judged plan after those pending; throws (or rejects with) {@link AnswerLimitError} when full. */
  plan(answer: PendingAnswer): void | Promise<void>
  /**
   * Takes the oldest plan of `operation` for one request (one of its `times`), or undefined when
   * none is pending. Plans of other operations are untouched.
   */
  take(operation: OperationId): PlannedAnswer | undefined | Promise<PlannedAnswer | undefined>
  /** The plans not used up, oldest first. */
  pending(): PendingAnswer[] | Promise<PendingAnswer[]>
  /** Drops every pending plan. */
  clear(): void | Promise<void>
}

/** Planned answers kept in this process: the library's and the browser's (and, through {@link AnswerBook}, the server's without Redis). */
export class AnswerQueue implements TenantAnswers {
  #plans: { readonly answer: PlannedAnswer; left: number }[] = []
  /** How many plans it holds. */
  get held(): number {
    return this.#plans.length
  }

  plan(answer: PendingAnswer): void {
    if (this.#plans.length >= MAX_PLANNED_ANSWERS) throw new AnswerLimitError(MAX_PLANNED_ANSWERS)
    const { times, ...planned } = answer
    this.#plans.push({ answer: planned, left: times })
  }

  take(operation: OperationId): PlannedAnswer | undefined {
    // @note Every request asks: with nothing planned, one comparison.
    if (this.#plans.length === 0) return undefined
    const at = this.#plans.findIndex((plan) => plan.answer.operation === operation)
    const found = this.#plans[at]
    if (found === undefined) return undefined
    if (--found.left === 0) {
      this.#plans.splice(at, 1)
    }
    return found.answer
  }

  pending(): PendingAnswer[] {
    return this.#plans.map(({ answer, left }) => ordered({ ...answer, times: left }))
  }

  clear(): void {
    this.#plans = []
  }

  /** Drops the plan added last (the one that would answer last), to make room in the {@link AnswerBook}. */
  dropNewest(): void {
    this.#plans.pop()
  }
}

/**
 * The most plans all tenants may hold together: those of one server process (without Redis), or
 * of every replica on one Redis key prefix (`redis-answers.ts`). Room for a hundred tenants
 * holding the most each may, about 2.5 MiB at an estimated 256 B a plan (about 1.1 MB in Redis).
 */
export const MAX_BOOK_PLANS = 100 * MAX_PLANNED_ANSWERS

/**
 * Refused: the plan book holds its cap of plans over all tenants and no tenant holds more than the
 * planner would after its plan, so none gives way (503 `plan_book_full`).
 */
export class PlanBookFullError extends Error {
  override readonly name = 'PlanBookFullError'
  constructor(readonly limit: number) {
    super(`the sandbox holds the most planned answers allowed over all tenants (${limit}), and no tenant holds more than this one would`)
  }
}

/**
 * The server's planned answers by tenant id, kept apart from the tenants so that a tenant leaving
 * memory (evicted to make room) keeps its plans. Holds a queue only while it has plans: a flood of
 * keys that plan nothing costs nothing. Bounded on its own ({@link MAX_BOOK_PLANS}), not through
 * the memory budget: plans from throw-away keys must never refuse another partner's writes. When
 * full, a new plan takes the room of the newest plan of the tenant holding the most (ties: the one
 * that came to that many longest ago), and only if that tenant holds more than the planner would
 * after its plan; else the plan is refused ({@link PlanBookFullError}). So a flood of keys holding
 * a few plans each never takes a partner's, and never refuses it below its share of the cap.
 */
export class AnswerBook {
  readonly #queues = new Map<string, AnswerQueue>()
  /**
   * The tenants by how many plans they hold (index), each set in the order they came to that many.
   * @note Every plan or take changes the count, so a set's first entry is the one idle longest.
   */
  readonly #byCount: Set<string>[] = Array.from({ length: MAX_PLANNED_ANSWERS + 1 }, () => new Set<string>())
  readonly #maxPlans: number
  #held = 0

  constructor(options: { readonly maxPlans?: number } = {}) {
    this.#maxPlans = Math.max(MAX_PLANNED_ANSWERS, options.maxPlans ?? MAX_BOOK_PLANS)
  }

  /** How many plans all tenants hold together (at most the book's cap). */
  get held(): number {
    return this.#held
  }

  /** The plans of tenant `id`, as its {@link TenantAnswers}. */
  of(id: string): TenantAnswers {
    const queues = this.#queues
    return {
      plan: (answer) => {
        let queue = queues.get(id)
        const before = queue?.held ?? 0
        // Refused at the tenant's own limit before anyone else's plans are dropped for it.
        if (before >= MAX_PLANNED_ANSWERS) throw new AnswerLimitError(MAX_PLANNED_ANSWERS)
        if (this.#held >= this.#maxPlans && !this.#makeRoom(before + 1)) throw new PlanBookFullError(this.#maxPlans)
        if (queue === undefined) queues.set(id, (queue = new AnswerQueue()))
        queue.plan(answer)
        this.#held++
        this.#counted(id, before, before + 1)
      },
      take: (operation) => {
        const queue = queues.get(id)
        if (queue === undefined) return undefined
        const before = queue.held
        const taken = queue.take(operation)
        if (taken === undefined) return undefined
        this.#held -= before - queue.held
        this.#counted(id, before, queue.held)
        if (queue.held === 0) queues.delete(id)
        return taken
      },
      pending: () => queues.get(id)?.pending() ?? [],
      clear: () => void this.drop(id),
    }
  }

  /** Drops the plans of tenant `id` (deleted, or gone with its writes); true when it had some. */
  drop(id: string): boolean {
    const queue = this.#queues.get(id)
    if (queue === undefined) return false
    this.#held -= queue.held
    this.#counted(id, queue.held, 0)
    queue.clear()
    this.#queues.delete(id)
    return true
  }

  /** Tenant `id` went from holding `before` plans to `after`. */
  #counted(id: string, before: number, after: number): void {
    this.#byCount[before]?.delete(id)
    if (after > 0) this.#byCount[after]?.add(id)
  }

  /** Drops the newest plan of the tenant holding the most, if it holds more than `after`; whether it did. */
  #makeRoom(after: number): boolean {
    for (let count = MAX_PLANNED_ANSWERS; count > after; count--) {
      const bucket = this.#byCount[count]
      const [id] = bucket ?? []
      const queue = id === undefined ? undefined : this.#queues.get(id)
      if (id === undefined || queue === undefined) continue
      queue.dropNewest()
      this.#held--
      this.#counted(id, count, count - 1)
      return true
    }
    return false
  }
}
