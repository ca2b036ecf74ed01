/**
 * A tenant's planned answers in Redis, so that every replica serving the tenant takes from one
 * queue and a plan answers exactly one request across them (docs/decisions/0013-planned-answers.md).
 *
 * Key (with the tenant's hash tag): `answers`, a list oldest first, each element
 * `<operation>\t<times left>\t<answer as JSON>`. Taking is one script (find the operation's
 * oldest plan, count one down, drop it at zero), so two replicas never take the same one.
 *
 * A request only sends the take when the list may hold plans: the tenant's scenario read (one
 * script per request, `RedisStorage.look`) also says whether the list exists, and tells
 * {@link RedisAnswers.saw}. A tenant that never planned costs no round trip more than before plans.
 */
import {
  MAX_PLANNED_ANSWERS,
  AnswerLimitError,
  type PendingAnswer,
  type PlannedAnswer,
  type TenantAnswers,
} from '../core/planned-answers.js'
import type { OperationId } from '../contract/operations.js'
import { NOW, redisScript, RedisScriptRefusal, type RedisLink } from './redis-connection.js'
import { recordedWrite, recordOutcome, replayOutcome, type OutcomeKeys } from './redis-outcomes.js'

/**
 * Adds a plan. KEYS: the list, then the tenant's outcome record (ops, opt). ARGV: the most plans
 * the list may hold; ttl ms (0: none); the element; the operation id; how long to keep its outcome
 * on record (ms). Refuses with FULL when the list holds the most already. Recorded, so that a plan
 * whose reply was lost is settled, never added twice (`redis-outcomes.ts`).
 */
const PLAN = redisScript(`
${replayOutcome('KEYS[2]', 4)}
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then return redis.error_reply('FULL') end
redis.call('RPUSH', KEYS[1], ARGV[3])
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
${NOW}
${recordOutcome('KEYS[2]', 'KEYS[3]', 4, 5, "'1'")}
return '1'
`)

/** Drops every plan. KEYS: the list, ops, opt. ARGV: the operation id, how long to keep its outcome on record (ms). Recorded as {@link PLAN}. */
const CLEAR = redisScript(`
${replayOutcome('KEYS[2]', 1)}
redis.call('DEL', KEYS[1])
${NOW}
${recordOutcome('KEYS[2]', 'KEYS[3]', 1, 2, "'1'")}
return '1'
`)

/**
 * Takes one answer of operation ARGV[1]: the oldest plan of that operation has one time less (and
 * goes at zero). Returns the answer's JSON, or false when none is planned.
 */
const TAKE = redisScript(`
local plans = redis.call('LRANGE', KEYS[1], 0, -1)
for i, plan in ipairs(plans) do
  local first = string.find(plan, '\\t', 1, true)
  if string.sub(plan, 1, first - 1) == ARGV[1] then
    local second = string.find(plan, '\\t', first + 1, true)
    local left = tonumber(string.sub(plan, first + 1, second - 1)) - 1
    local answer = string.sub(plan, second + 1)
    if left > 0 then
      redis.call('LSET', KEYS[1], i - 1, ARGV[1] .. '\\t' .. string.format('%d', left) .. '\\t' .. answer)
    else
      redis.call('LSET', KEYS[1], i - 1, '')
      redis.call('LREM', KEYS[1], 1, '')
    end
    return answer
  end
end
return false
`)

/**
 * A tenant's planned answers in Redis, as one replica serves them.
 * @note Whether a take is sent is decided by this replica's reads of whether the list exists,
 * each given a ticket when sent: the latest sent that has answered decides, whatever order the
 * answers come in. A request's own read is sent after it arrived, so the read that decides for
 * it ran in Redis after it was sent: a plan acknowledged before then is seen (or was used up, or
 * cleared, by then). Only a plan made while the request is under way may be missed, as it may be
 * without the skip. Exactly once holds either way: the take itself is one script.
 */
export class RedisAnswers implements TenantAnswers {
  readonly #link: RedisLink
  readonly #key: string
  readonly #outcomes: OutcomeKeys
  readonly #ttlMs: number
  /** Tickets given to reads of whether the list exists (and to this replica's plans), in order. */
  #issued = 0
  /** The ticket of the read (or plan) that decided {@link #mayHold}. */
  #decidedBy = 0
  /** Whether the list may hold plans: a take is sent only then. */
  #mayHold = true
  /** @param keys the tenant's `answers` list and outcome record; @param ttlMs its keys' TTL (0: none) */
  constructor(link: RedisLink, keys: OutcomeKeys & { readonly answers: string }, ttlMs: number) {
    this.#link = link
    this.#key = keys.answers
    this.#outcomes = { outcomes: keys.outcomes, outcomeTimes: keys.outcomeTimes }
    this.#ttlMs = ttlMs
  }

  /** A read of whether the list exists is being sent: its ticket, for {@link saw}. */
  reading(): number {
    return ++this.#issued
  }

  /** Read `ticket` found the list (`exists`) or not; a read sent before one already heard from is ignored. */
  saw(ticket: number, exists: boolean): void {
    if (ticket <= this.#decidedBy) return
    this.#decidedBy = ticket
    this.#mayHold = exists
  }

  /** The script's keys: the list, then the outcome record. */
  #keys(): string[] {
    return [this.#key, this.#outcomes.outcomes, this.#outcomes.outcomeTimes]
  }

  async plan(answer: PendingAnswer): Promise<void> {
    const { times, ...planned } = answer
    try {
      const element = `${answer.operation}\t${times}\t${JSON.stringify(planned)}`
      await recordedWrite(this.#link, this.#outcomes, `a planned answer of ${this.#key}`, PLAN, this.#keys(), (op, keepMs) => [MAX_PLANNED_ANSWERS, this.#ttlMs, element, op, keepMs])
    } catch (error) {
      if (error instanceof RedisScriptRefusal && error.message === 'FULL') throw new AnswerLimitError(MAX_PLANNED_ANSWERS)
      throw error
    }
    // Planned here: requests under way take from the list too (a read sent before it may not have seen it).
    this.saw(this.reading(), true)
  }

  take(operation: OperationId): Promise<PlannedAnswer | undefined> | undefined {
    // @note Every API request asks: when the last read found no list, no round trip.
    if (!this.#mayHold) return undefined
    return this.#link.script(TAKE, [this.#key], [operation]).then((reply) => (typeof reply === 'string' ? (JSON.parse(reply) as PlannedAnswer) : undefined))
  }

  async pending(): Promise<PendingAnswer[]> {
    const plans = (await this.#link.call(this.#key, ['LRANGE', this.#key, '0', '-1'])) as string[]
    return plans.map((plan) => {
      const [, times, answer] = /^[^\t]*\t(\d+)\t(.*)$/s.exec(plan) ?? []
      return { ...(JSON.parse(answer ?? '{}') as PlannedAnswer), times: Number(times) }
    })
  }

  async clear(): Promise<void> {
    await recordedWrite(this.#link, this.#outcomes, `the planned answers' clear of ${this.#key}`, CLEAR, this.#keys(), (op, keepMs) => [op, keepMs])
  }
}
