/**
 * Writes to Redis whose outcome is learnt even when their reply is lost: each such write carries
 * an operation id, which its script records (with its result) in the tenant's `ops` hash and `opt`
 * sorted set; a write sent and never answered (a timeout, a connection dropped after sending) is
 * then settled by asking Redis about that id (docs/decisions/0005-redis-replicas.md, issue 20 F03).
 * Creates, scenario switches and resets, journal clears and planned-answer writes all go this way,
 * so an answer states the write's true outcome: applied, not applied (and now never), or unknown.
 */
import { randomBytes } from 'node:crypto'
import { monotonicNow } from '../core/clock.js'
import { StorageUnavailableError, WriteOutcomeUnknownError } from './storage.js'
import { NOW, RedisOutcomeUnknown, RedisScriptRefusal, redisScript, type RedisLink, type RedisScript } from './redis-connection.js'

/**
 * How long a write's outcome stays on record under its operation id (`ops`, `opt`), at least:
 * longer than any request waits for Redis, so that a request whose write went unanswered can ask.
 */
export const OUTCOME_RECORD_MS = 120_000
/**
 * The most write outcomes one tenant keeps on record on a Redis Cluster, where each tenant has a
 * record of its own (the oldest go first): the number of tenants bounds them all there.
 */
export const OUTCOME_RECORD_ENTRIES = 1024
/**
 * The most write outcomes all tenants of one key prefix keep on record together on one Redis
 * (`Pops`, `Popt`: one record shared by every tenant, the oldest going first), however many keys
 * write: about 3.2 MB of Redis at most, as measured (bench/outcome-flood.ts).
 */
export const OUTCOME_RECORD_TOTAL = 16_384

/** How many command timeouts a write sent and never answered is settled within, outside a request. */
const SETTLE_ROUNDS = 2
/** The pause between two questions to a Redis that refuses them at once (down, reconnecting). */
const SETTLE_PAUSE_MS = 100

/**
 * An outcome record: `ops` (hash, operation id → outcome) and `opt` (sorted set, operation id →
 * when), and how many entries it keeps: on one Redis, `Pops` and `Popt`, shared by all tenants
 * ({@link OUTCOME_RECORD_TOTAL}); on a Redis Cluster, the tenant's own `P{id}:ops` and `P{id}:opt`
 * ({@link OUTCOME_RECORD_ENTRIES}: a script may only touch the tenant's slot).
 */
export interface OutcomeKeys {
  readonly outcomes: string
  readonly outcomeTimes: string
  /** The most entries the record keeps. */
  readonly outcomeEntries: number
}

/**
 * Lua: records the outcome `value` (a result, or `void`: never to be applied) of operation
 * ARGV[`op`] in `ops` and `opt` for ARGV[`keep`] ms and at most ARGV[`cap`] entries (the record's
 * {@link OutcomeKeys.outcomeEntries}), the oldest going first; `!trimmed` in `ops` says when an
 * entry last went before its time. Needs `now` ({@link NOW}).
 */
export const recordOutcome = (ops: string, opt: string, op: number, keep: number, cap: number, value: string) => `local keep = tonumber(ARGV[${keep}])
redis.call('HSET', ${ops}, ARGV[${op}], ${value})
redis.call('ZADD', ${opt}, now, ARGV[${op}])
local old = redis.call('ZRANGEBYSCORE', ${opt}, '-inf', now - keep, 'LIMIT', 0, 16)
local over = redis.call('ZCARD', ${opt}) - #old - tonumber(ARGV[${cap}])
if over > 0 then
  for _, early in ipairs(redis.call('ZRANGE', ${opt}, #old, #old + math.min(over, 16) - 1)) do table.insert(old, early) end
  redis.call('HSET', ${ops}, '!trimmed', string.format('%d', now))
end
if #old > 0 then
  redis.call('HDEL', ${ops}, unpack(old))
  redis.call('ZREM', ${opt}, unpack(old))
end
redis.call('PEXPIRE', ${ops}, keep)
redis.call('PEXPIRE', ${opt}, keep)`

/**
 * Lua, a recorded write's first lines: when operation ARGV[`op`] already ran, its recorded result
 * again (it is never applied twice); VOID when it was declared never applied ({@link SETTLE}).
 */
export const replayOutcome = (ops: string, op: number) => `local done = redis.call('HGET', ${ops}, ARGV[${op}])
if done == 'void' then return redis.error_reply('VOID') end
if done then return done end`

/**
 * Settles a write that got no answer. KEYS: ops, opt. ARGV: the operation id; how long to keep
 * the outcome on record (ms); the most entries the record keeps. Returns the write's recorded
 * result; or `void` when it was not applied, and records that it never will be (the write, should
 * it still arrive, refuses with VOID); or `unknown` when its record may have been trimmed (more
 * writes since than the record keeps).
 */
const SETTLE = redisScript(`
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then return done end
${NOW}
local trimmed = redis.call('HGET', KEYS[1], '!trimmed')
if trimmed and now - tonumber(trimmed) < tonumber(ARGV[2]) then return 'unknown' end
${recordOutcome('KEYS[1]', 'KEYS[2]', 1, 2, 3, "'void'")}
return 'void'
`)

/** A new operation id. */
export function operationId(): string {
  return randomBytes(12).toString('base64url')
}

/** How long a write's outcome stays on record: {@link OUTCOME_RECORD_MS}, or longer than the request may still wait. */
export function outcomeRecordMs(link: RedisLink): number {
  return Math.max(OUTCOME_RECORD_MS, (link.requestTimeLeft() ?? link.commandTimeoutMs * SETTLE_ROUNDS) + OUTCOME_RECORD_MS)
}

/**
 * Runs a recorded write (a script that starts with {@link replayOutcome} and ends with
 * {@link recordOutcome}, given the operation id, the record's time and its most entries by `args`) and returns its
 * result, applied. `what` names it in messages ("the reset of tenant x").
 * @throws StorageUnavailableError when it was not applied (and now never will be);
 * WriteOutcomeUnknownError when Redis could not tell in time; a RedisScriptRefusal of its own.
 */
export async function recordedWrite(link: RedisLink, keys: OutcomeKeys, what: string, script: RedisScript, scriptKeys: readonly string[], args: (op: string, keepMs: number, entries: number) => readonly (string | number)[], op = operationId()): Promise<unknown> {
  try {
    return await link.script(script, scriptKeys, args(op, outcomeRecordMs(link), keys.outcomeEntries))
  } catch (error) {
    if (error instanceof RedisScriptRefusal && error.message === 'VOID') throw new StorageUnavailableError(`Redis: ${what} (operation ${op}) was declared not applied`)
    if (!(error instanceof RedisOutcomeUnknown)) throw error
    return settleOutcome(link, keys, op, error, what)
  }
}

/**
 * Finds out what became of write `op`, sent and never answered, within the request's time (or
 * {@link SETTLE_ROUNDS} command timeouts outside a request): asks Redis, again while it does not
 * answer. Its recorded result (applied), or a {@link StorageUnavailableError} when it was not
 * applied (and now never will be: {@link SETTLE} voids it), or a {@link WriteOutcomeUnknownError}
 * when Redis could not tell in time.
 * @note On the same connection, Redis answers commands in order: an answer to the question
 * means the write was run, or never will be, before it (issue 20 F03).
 */
export async function settleOutcome(link: RedisLink, keys: OutcomeKeys, op: string, failure: StorageUnavailableError, what: string): Promise<string> {
  const until = monotonicNow() + (link.requestTimeLeft() ?? link.commandTimeoutMs * SETTLE_ROUNDS)
  let last: unknown = failure
  while (monotonicNow() < until && link.requestTimeLeft() !== 0) {
    let reply: string
    try {
      reply = String(await link.script(SETTLE, [keys.outcomes, keys.outcomeTimes], [op, outcomeRecordMs(link), keys.outcomeEntries]))
    } catch (error) {
      if (!(error instanceof StorageUnavailableError)) throw error
      last = error
      // A question never answered has taken its time already; one refused at once waits a little.
      if (!(error instanceof RedisOutcomeUnknown)) await new Promise((resolve) => setTimeout(resolve, SETTLE_PAUSE_MS))
      continue
    }
    if (reply === 'void') throw new StorageUnavailableError(`${failure.message} (${what} was not applied)`, { cause: failure })
    if (reply === 'unknown') break
    return reply
  }
  throw new WriteOutcomeUnknownError(`${failure.message}; whether ${what} was applied is unknown`, { cause: last })
}
