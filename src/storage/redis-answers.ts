/**
 * A tenant's planned answers in Redis, so that every replica serving the tenant takes from one
 * queue and a plan answers exactly one request across them (docs/decisions/0013-planned-answers.md).
 *
 * Key (with the tenant's hash tag): `answers`, a list oldest first, each element
 * `<operation>\t<times left>\t<answer as JSON>`. Taking is one script (find the operation's
 * oldest plan, count one down, drop it at zero), so two replicas never take the same one.
 *
 * The plan book, shared by all tenants (no hash tag, so not on a Redis Cluster): `Pplans`, a
 * sorted set of the tenants holding plans, each scored by how many it holds and when it came to
 * that many (Redis's time; {@link bookScore}), and `Pplanned`, how many plans their lists hold
 * together. The scripts that add, take and drop plans keep both true, and the one that adds makes
 * room under the cap by dropping the newest plan of the tenant holding the most, only if it holds
 * more than the planner will, else refuses: the rule of the in-process `AnswerBook`, decided in
 * one script so that replicas agree.
 *
 * A request only sends the take when the list may hold plans: the tenant's scenario read (one
 * script per request, `RedisStorage.look`) also says whether the list exists, and tells
 * {@link RedisAnswers.saw}. A tenant that never planned costs no round trip more than before plans.
 */
import {
  MAX_PLANNED_ANSWERS,
  AnswerLimitError,
  PlanBookFullError,
  type PendingAnswer,
  type PlannedAnswer,
  type TenantAnswers,
} from '../core/planned-answers.js'
import type { OperationId } from '../contract/operations.js'
import { NOW, redisScript, RedisScriptRefusal, type RedisLink } from './redis-connection.js'
import { recordedWrite, recordOutcome, replayOutcome, typesBeforeWriting, type OutcomeKeys } from './redis-outcomes.js'

/** The plan book's keys (`Pplans`, `Pplanned`), and what a script needs to name other tenants' lists. */
export interface PlanBookKeys {
  /** Sorted set: tenant id → how many plans it holds and when it came to that many (see `bookScore`). */
  readonly tenants: string
  /** How many plans the lists of {@link tenants} hold together. */
  readonly count: string
  /** The key prefix, to name another tenant's list (`<prefix>{<id>}:answers`). */
  readonly prefix: string
  /** The most plans all tenants may hold together. */
  readonly maxPlans: number
}

/** Lua: the `answers` list of tenant `id`, from the key prefix `prefix` (as `RedisStorage.keys` names it). */
const listOf = (prefix: string, id: string) => `${prefix} .. '{' .. ${id} .. '}:answers'`

/**
 * Lua: the score in `Pplans` of a tenant holding `held` plans as of `now` (ms): the count above
 * {@link SLOT}, and below it the time counted down, so that the highest score is the tenant
 * holding the most, of those the one that came to that many longest ago.
 */
const bookScore = (held: string) => `string.format('%d', (${held}) * ${SLOT} + ${SLOT} - now)`
/** 10^13 ms (year 2286) as a Lua number: scores stay whole numbers below 2^53 (100 plans × 10^13). */
const SLOT = '10000000000000'

/**
 * Lua: takes tenant ARGV[`id`] (whose list is `list`) out of the plan book (`book`, `count`),
 * its plans no longer counted. Before the list is deleted.
 */
export const leaveBook = (book: string, count: string, list: string, id: number) => `if redis.call('ZREM', ${book}, ARGV[${id}]) == 1 then
  local gone = redis.call('LLEN', ${list})
  if gone > 0 then redis.call('DECRBY', ${count}, gone) end
end`

/** The keys a plan's, a clear's and a take's script write, of the types they hold (see {@link typesBeforeWriting}). */
const PLAN_KEY_TYPES = typesBeforeWriting([
  ['KEYS[1]', 'list'],
  ['KEYS[2]', 'hash', ['!seq']],
  ['KEYS[3]', 'zset'],
  ['KEYS[4]', 'zset'],
  ['KEYS[5]', 'integer'],
])

/**
 * Adds a plan. KEYS: the list, then the tenant's outcome record (ops, opt), then the plan book
 * (`Pplans`, `Pplanned`; not on a Cluster). ARGV: the most plans the list may hold; ttl ms (0:
 * none); the element; the operation id; how long to keep its outcome on record (ms); the most
 * plans the book may hold; the tenant's id; the key prefix; the most entries the outcome record
 * keeps. Refuses with FULL when the list holds
 * the most already. With the book full, drops the newest plan of the tenant holding the most (of
 * those, the one that came to that many longest ago), if it holds more than the planner will;
 * else refuses with BOOK (a list planned before the book existed is counted when its tenant next
 * plans or takes; one Redis expired is taken out of the book when met). Recorded, so that a plan
 * whose reply was lost is settled, never added twice (`redis-outcomes.ts`).
 */
const PLAN = redisScript(`
${PLAN_KEY_TYPES}
${replayOutcome('KEYS[2]', 4, 5)}
local held = redis.call('LLEN', KEYS[1])
if held >= tonumber(ARGV[1]) then return redis.error_reply('FULL') end
${NOW}
if KEYS[4] then
  local count = math.max(0, tonumber(redis.call('GET', KEYS[5]) or '0'))
  if not redis.call('ZSCORE', KEYS[4], ARGV[7]) then count = count + held end
  while count >= tonumber(ARGV[6]) do
    local top = redis.call('ZREVRANGE', KEYS[4], 0, 0, 'WITHSCORES')
    local other = top[1]
    if not other then
      count = held
      break
    end
    local list = ${listOf('ARGV[8]', 'other')}
    local theirs = redis.call('LLEN', list)
    local counted = math.floor(tonumber(top[2]) / ${SLOT})
    if other ~= ARGV[7] and theirs ~= counted then
      count = math.max(0, count - counted + theirs)
      if theirs == 0 then redis.call('ZREM', KEYS[4], other) else redis.call('ZADD', KEYS[4], ${bookScore('theirs')}, other) end
    elseif other ~= ARGV[7] and theirs > held + 1 then
      redis.call('RPOP', list)
      count = count - 1
      redis.call('ZADD', KEYS[4], ${bookScore('theirs - 1')}, other)
    else
      redis.call('SET', KEYS[5], string.format('%d', count))
      return redis.error_reply('BOOK')
    end
  end
  redis.call('ZADD', KEYS[4], ${bookScore('held + 1')}, ARGV[7])
  redis.call('SET', KEYS[5], string.format('%d', count + 1))
end
redis.call('RPUSH', KEYS[1], ARGV[3])
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
${recordOutcome('KEYS[2]', 'KEYS[3]', 4, 5, 9, "'1'")}
return '1'
`)

/**
 * Drops every plan. KEYS: the list, ops, opt, then the plan book (not on a Cluster). ARGV: the
 * operation id, how long to keep its outcome on record (ms), the tenant's id, the most entries
 * the outcome record keeps. Recorded as {@link PLAN}.
 */
const CLEAR = redisScript(`
${PLAN_KEY_TYPES}
${replayOutcome('KEYS[2]', 1, 2)}
if KEYS[4] then
  ${leaveBook('KEYS[4]', 'KEYS[5]', 'KEYS[1]', 3).replaceAll('\n', '\n  ')}
end
redis.call('DEL', KEYS[1])
${NOW}
${recordOutcome('KEYS[2]', 'KEYS[3]', 1, 2, 4, "'1'")}
return '1'
`)

/**
 * Takes one answer of operation ARGV[1]: the oldest plan of that operation has one time less (and
 * goes at zero). KEYS: the list, ops, opt, then the plan book (not on a Cluster). ARGV: the
 * operation, the tenant's id, the operation id, how long to keep its outcome on record (ms), the
 * most entries the outcome record keeps. A take is a use: the tenant's count and time in the book
 * are renewed, or it leaves the book with its last plan. Returns the answer's JSON, or false when
 * none is planned. A take is recorded (the answer's JSON its result: a few dozen bytes), so that a
 * request whose take's reply was lost gets the answer it took, or it was not taken (attack7 K4);
 * one that took nothing leaves no record (settled as not applied: nothing was taken).
 */
const TAKE = redisScript(`
${PLAN_KEY_TYPES}
${replayOutcome('KEYS[2]', 3, 4)}
local plans = redis.call('LRANGE', KEYS[1], 0, -1)
for i, plan in ipairs(plans) do
  local first = string.find(plan, '\t', 1, true)
  if string.sub(plan, 1, first - 1) == ARGV[1] then
    local second = string.find(plan, '\t', first + 1, true)
    local left = tonumber(string.sub(plan, first + 1, second - 1)) - 1
    local answer = string.sub(plan, second + 1)
    local counted = 0
    if KEYS[4] and redis.call('ZSCORE', KEYS[4], ARGV[2]) then counted = #plans end
    if left > 0 then
      redis.call('LSET', KEYS[1], i - 1, ARGV[1] .. '\t' .. string.format('%d', left) .. '\t' .. answer)
    else
      redis.call('LSET', KEYS[1], i - 1, '')
      redis.call('LREM', KEYS[1], 1, '')
    end
    ${NOW.replaceAll('\n', '\n    ')}
    if KEYS[4] then
      local remaining = #plans - (left > 0 and 0 or 1)
      if remaining ~= counted then redis.call('INCRBY', KEYS[5], remaining - counted) end
      if remaining > 0 then
        redis.call('ZADD', KEYS[4], ${bookScore('remaining')}, ARGV[2])
      else
        redis.call('ZREM', KEYS[4], ARGV[2])
      end
    end
    ${recordOutcome('KEYS[2]', 'KEYS[3]', 3, 4, 5, 'answer').replaceAll('\n', '\n    ')}
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
  /** The tenant's id, and the plan book it is counted in (undefined on a Cluster: not enforced there). */
  readonly #tenant: string
  readonly #book: PlanBookKeys | undefined
  /** Tickets given to reads of whether the list exists (and to this replica's plans), in order. */
  #issued = 0
  /** The ticket of the read (or plan) that decided {@link #mayHold}. */
  #decidedBy = 0
  /** Whether the list may hold plans: a take is sent only then. */
  #mayHold = true
  /**
   * @param keys the tenant's `answers` list and the outcome record it writes to; @param ttlMs its keys' TTL (0: none);
   * @param tenant its id; @param book the plan book, undefined on a Cluster
   */
  constructor(link: RedisLink, keys: OutcomeKeys & { readonly answers: string }, ttlMs: number, tenant: string, book: PlanBookKeys | undefined) {
    this.#link = link
    this.#key = keys.answers
    this.#outcomes = { outcomes: keys.outcomes, outcomeTimes: keys.outcomeTimes, outcomeEntries: keys.outcomeEntries, outcomeMs: keys.outcomeMs }
    this.#ttlMs = ttlMs
    this.#tenant = tenant
    this.#book = book
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

  /** The plan book's keys, last of a script's keys, when it is kept (not on a Cluster). */
  #bookKeys(): string[] {
    return this.#book === undefined ? [] : [this.#book.tenants, this.#book.count]
  }

  /** The script's keys: the list, then the outcome record, then the plan book. */
  #keys(): string[] {
    return [this.#key, this.#outcomes.outcomes, this.#outcomes.outcomeTimes, ...this.#bookKeys()]
  }

  async plan(answer: PendingAnswer): Promise<void> {
    const { times, ...planned } = answer
    try {
      const element = `${answer.operation}\t${times}\t${JSON.stringify(planned)}`
      await recordedWrite(this.#link, this.#outcomes, `a planned answer of ${this.#key}`, PLAN, this.#keys(), (op, keepMs, entries) => [
        MAX_PLANNED_ANSWERS,
        this.#ttlMs,
        element,
        op,
        keepMs,
        this.#book?.maxPlans ?? 0,
        this.#tenant,
        this.#book?.prefix ?? '',
        entries,
      ])
    } catch (error) {
      if (error instanceof RedisScriptRefusal && error.message === 'FULL') throw new AnswerLimitError(MAX_PLANNED_ANSWERS)
      if (error instanceof RedisScriptRefusal && error.message === 'BOOK') throw new PlanBookFullError(this.#book?.maxPlans ?? 0)
      throw error
    }
    // Planned here: requests under way take from the list too (a read sent before it may not have seen it).
    this.saw(this.reading(), true)
  }

  take(operation: OperationId): Promise<PlannedAnswer | undefined> | undefined {
    // @note Every API request asks: when the last read found no list, no round trip.
    if (!this.#mayHold) return undefined
    // @note Not waited for by replicas (`confirm: false`): a read that took a plan was answered
    // 503 write_outcome_unknown with its plan used up (trial5 P7). A take a failover loses gives
    // the plan once more.
    return recordedWrite(this.#link, this.#outcomes, `the take of a planned answer of ${this.#key}`, TAKE, this.#keys(), (op, keepMs, entries) => [operation, this.#tenant, op, keepMs, entries], { confirm: false }).then((reply) =>
      typeof reply === 'string' ? (JSON.parse(reply) as PlannedAnswer) : undefined,
    )
  }

  async pending(): Promise<PendingAnswer[]> {
    const plans = (await this.#link.call(this.#key, ['LRANGE', this.#key, '0', '-1'])) as string[]
    return plans.map((plan) => {
      const [, times, answer] = /^[^\t]*\t(\d+)\t(.*)$/s.exec(plan) ?? []
      return { ...(JSON.parse(answer ?? '{}') as PlannedAnswer), times: Number(times) }
    })
  }

  async clear(): Promise<void> {
    await recordedWrite(this.#link, this.#outcomes, `the planned answers' clear of ${this.#key}`, CLEAR, this.#keys(), (op, keepMs, entries) => [op, keepMs, this.#tenant, entries])
  }
}

/**
 * Counts the plan book again from the lists themselves. KEYS: `Pplans`, `Pplanned`. ARGV: the key
 * prefix. A tenant whose list Redis expired by its TTL leaves the book (nothing tells a replica
 * when Redis expires a key). Returns the count. One script over at most the book's tenants (each
 * holding at least one plan, but for those expired since the last sweep). An empty book leaves no key.
 */
const RECOUNT = redisScript(`
local count = 0
local ids = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #ids, 2 do
  local id = ids[i]
  local held = redis.call('LLEN', ${listOf('ARGV[1]', 'id')})
  if held == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    count = count + held
    local score = tonumber(ids[i + 1])
    -- The time part kept; a score from before counts were kept is a time alone.
    local now = ${SLOT} - (score % ${SLOT})
    if score < ${SLOT} then now = score end
    redis.call('ZADD', KEYS[1], ${bookScore('held')}, id)
  end
end
if count > 0 then redis.call('SET', KEYS[2], string.format('%d', count)) else redis.call('DEL', KEYS[2]) end
return count
`)

/** Counts the plan book again (part of the sweep, at start and hourly); how many plans it holds. */
export async function recountPlans(link: RedisLink, book: PlanBookKeys): Promise<number> {
  return Number(await link.script(RECOUNT, [book.tenants, book.count], [book.prefix]))
}
