/**
 * The Redis {@link TenantStorage} behind `--redis-url`: every tenant in Redis (or a Redis
 * Cluster), so that any number of sandbox processes serve every tenant identically. See
 * docs/decisions/0005-redis-replicas.md for the key layout and why each write is atomic.
 *
 * Keys (`P` is the prefix, `petstore-sandbox:` by default; `{id}` is a Redis Cluster hash tag, so
 * all of one tenant's keys live in one slot and one script may touch them all):
 * - `P{id}:meta` hash: `scenario`, `next` (the next category id), `updated` (last write, ms),
 *   `used` (last request, ms), `state` (the state's version, a random token each state write sets:
 *   a list read in pages checks it, {@link RedisStorage.readList}): exists only once the tenant has
 *   written; without it the tenant is on the default seed;
 * - `P{id}:cats` list: the categories as JSON, in creation order;
 * - `P{id}:journal`, `P{id}:jsizes`, `P{id}:jmeta`: the journal (`redis-journal.ts`);
 * - `P{id}:answers` list: planned answers (`redis-answers.ts`);
 * - `Ptenants` sorted set: the tenant registry, id → last write (ms);
 * - `Pops` hash and `Popt` sorted set: the outcomes of recorded writes, shared by all tenants and
 *   bounded in all (`redis-outcomes.ts`); on a Redis Cluster each tenant's own `P{id}:ops` and
 *   `P{id}:opt` instead;
 * - `Pplans` sorted set and `Pplanned`: the plan book, the tenants holding planned answers (scored
 *   by how many each holds) and how
 *   many they hold together (`redis-answers.ts`; not on a Redis Cluster);
 * - with a store budget, `Pusage` hash (what tenants hold), `Pfloors` sorted set (the tenants
 *   holding their floor, id → last write, ms), `Pjweights` sorted set (each tenant's journal
 *   weight) and `Pjused` sorted set (the journals' last entry, ms).
 *
 * Every write is one Lua script on one tenant's keys: Redis runs a script alone, so a create's id
 * (read and advanced in the script) is unique across replicas, and a reset replaces categories,
 * next id and scenario at once. A write is answered once Redis has run it.
 */
import { PetstoreError } from '../core/petstore-error.js'
import { monotonicNow } from '../core/clock.js'
import { randomBytes, randomUUID } from 'node:crypto'
import type { Category, NewCategory } from '../contract/schemas.js'
import { DEFAULT_JOURNAL_BYTES, type TenantJournal } from '../core/journal.js'
import {
  CategoryLimitError,
  IdSpaceExhaustedError,
  StorageUnavailableError,
  toCategory,
  type StorageHealth,
  type TenantState,
  type TenantStorage,
  type TenantStore,
  type TenantSummary,
} from './storage.js'
import { connectRedis, COUNT_LOOSELY, NOTHING_WRITTEN, NOW, parseRedisUrl, RedisOutcomeUnknown, RedisScriptRefusal, redisScript, REPLICAS_KEY_REMEDY, type RedisEpoch, type RedisLink, WrongTypeError } from './redis-connection.js'
import { usableBeatText, usableCount, USABLE_COUNT } from './redis-counts.js'
import { lastRecordedOp, lateWrite, newOperation, noteRecorded, OUTCOME_RECORD_ENTRIES, OUTCOME_RECORD_MS, OUTCOME_RECORD_TOTAL, keyTypeName, recordedWrite, recordOutcome, replayOutcome, settleOutcome, timedByAnotherClock, typesBeforeWriting, type KeyType, type OutcomeKeys } from './redis-outcomes.js'
import { leaveBook, recountPlans, RedisAnswers, type PlanBookKeys } from './redis-answers.js'
import { MAX_BOOK_PLANS, MAX_PLANNED_ANSWERS } from '../core/planned-answers.js'
import { RedisJournal, releaseJournal } from './redis-journal.js'
import { CATEGORY_OVERHEAD, FLOOR_IDLE_MS, FLOOR_LAPSES_PER_WRITE, storeFull, storeKept, TENANT_OVERHEAD, tenantFloorBytes, tenantStoredBytes } from './stored-bytes.js'

/** @default 'petstore-sandbox:' */
export const DEFAULT_REDIS_PREFIX = 'petstore-sandbox:'

/** Options of {@link openRedisStorage}. */
export interface RedisStorageOptions {
  /** `redis://`, `rediss://`, `redis-cluster://` or a list of nodes (see `parseRedisUrl`). */
  readonly url: string
  /** The state of a tenant that has never written (the server's scenario's seed). */
  readonly seed: TenantState
  /**
   * A tenant's keys expire this long after its last request (a write, or any request it is
   * journaled for); 0 keeps them until deleted.
   * @default 0
   */
  readonly ttlMs?: number | undefined
  /** Prefix of every key, so several sandboxes can share one Redis. @default {@link DEFAULT_REDIS_PREFIX} */
  readonly prefix?: string | undefined
  /** A command not answered by then fails with 503. @default 2000 */
  readonly commandTimeoutMs?: number | undefined
  /** What a journal's bodies may weigh. @default {@link DEFAULT_JOURNAL_BYTES} */
  readonly journalBytes?: number | undefined
  /** Told about Redis failures and recoveries (the operator's log). @default none */
  readonly warn?: ((message: string) => void) | undefined
  /** When Redis does not answer at start: refuse to open, or open and answer 503 until it does (see `connectRedis`). @default 'refuse' */
  readonly unreachableAtStart?: 'refuse' | 'serve' | undefined
  /** Accept a Redis whose `maxmemory-policy` may evict keys (see `RedisLinkOptions.allowEviction`). @default false */
  readonly allowEviction?: boolean | undefined
  /** Answer writes before a replica confirms them (see `RedisLinkOptions.allowFailoverLoss`). @default false */
  readonly allowFailoverLoss?: boolean | undefined
  /** How many replicas each master has (see `RedisLinkOptions.replicas`). @default the most seen online */
  readonly replicas?: number | undefined
  /** The epoch a sandbox this one replaces last knew (see `RedisLinkOptions.epoch`). @default none */
  readonly epoch?: RedisEpoch | undefined
  /** See {@link RedisLinkOptions.replacing}. */
  readonly replacing?: boolean | undefined
  /** Told each newer epoch this sandbox knows (see `RedisLinkOptions.onEpoch`). @default none */
  readonly onEpoch?: ((epoch: RedisEpoch) => void) | undefined
  /**
   * What all tenants' data together may hold in Redis, in bytes (categories and saved state, as
   * written: each category's JSON, by the rule every durable store uses, `stored-bytes.ts`),
   * counted in the `usage` hash by the scripts that write them: a create or a scenario switch past it, or into room kept for other
   * tenants' floors, is refused ({@link storeFull}, {@link storeKept}).
   * Journals are counted apart, against a budget of their own of the same size (so Redis holds
   * about twice this; each entry counts its JSON as written, or its heap weight where that is
   * more: `redis-journal.ts`), which they never pass: past it, the journal recording drops its oldest
   * entries down to its share (that budget over the tenants holding a journal slot, never under
   * the floor), then the largest journals above their floor drop theirs. So
   * no request, refused or not, takes room from any tenant's data, and a tenant within its floor
   * is always journaled. Not enforced on a Redis Cluster (a script cannot count across slots; the
   * operator is told).
   * @default none: unbounded (size Redis with `maxmemory` and `noeviction`)
   */
  readonly storedBytesBudget?: number | undefined
  /**
   * The most planned answers all tenants may hold together, as the server's plan book holds
   * without Redis (never fewer than one tenant's {@link MAX_PLANNED_ANSWERS}); past it, a new plan
   * drops the plans of the tenant planned for or answered longest ago (`redis-answers.ts`). Every
   * replica on one prefix should use the same. Not enforced on a Redis Cluster (the operator is told).
   * @default {@link MAX_BOOK_PLANS}
   */
  readonly maxPlans?: number | undefined
  /**
   * @internal How long the write outcome records keep each entry (ms), and so how long after it
   * was sent a recorded write may still be applied (tests shorten it; every replica on one prefix
   * must use the same). @default {@link OUTCOME_RECORD_MS}
   */
  readonly outcomeRecordMs?: number | undefined
}

/** How many categories one RPUSH sends from inside a script (Lua's `unpack` has a limit). */
const PUSH_CHUNK = 1000
/** Health's reads of the shared keys' types: checks of the sandbox's own, an ACL refusal of which is no request's (attack60 F3). */
const OWN = { own: true } as const

/** Lua: renews the TTL of both of a tenant's keys to ARGV[`arg`] ms (0: they never expire). */
const renewTtl = (arg: number) => `local ttl = tonumber(ARGV[${arg}])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end`

/**
 * Lua: what a tenant holding `held` bytes claims of the budget, its floor being `floor`, holding
 * its floor or not (`floored`, a Lua boolean) (`claimedBytes` in `stored-bytes.ts`).
 */
const claimed = (held: string, floor: string, floored: string) => `(${held} == 0 and 0 or ((${floored}) and math.max(${held}, ${floor}) or ${held}))`

/**
 * Lua: counts a change of what tenant ARGV[`id`] holds in the usage hash KEYS[`usage`] (only
 * given with a store budget), KEYS[`usage`+1] being the floors (`Pfloors`: the tenants holding
 * their floor, id → last write): its field becomes `bytes`, `!total` (what tenants hold) and
 * `!claimed` (what they claim: each at least its floor ARGV[`floor`] while it holds one) follow.
 * Decides as `storeCharge` in `stored-bytes.ts` does: BUDGET when the total would pass
 * ARGV[`budget`]; the tenant takes (or keeps) its floor when the claims allow it, else, once the
 * floors of tenants idle for {@link FLOOR_IDLE_MS} by Redis's time (their meta's `updated` and
 * `used`) have lapsed, writes without one when the claims allow that, KEPT otherwise. A write
 * that stores no more than the tenant holds is never refused, so room can always be made. Runs
 * before the script's first write, except the lapses (counted as they are made).
 */
const charge = (usage: number, id: number, bytes: string, budget: number, floor: number) => `if KEYS[${usage}] then
  ${NOW.replaceAll('\n', '\n  ')}
  -- @note The tenant's own count, of no use (\`inf\` written by hand), wrapped the shared total past 2^63: every tenant's writes refused (attack29 F3).
  local oldText = redis.call('HGET', KEYS[${usage}], ARGV[${id}])
  if oldText and not usable_bytes(oldText) then return redis.error_reply('${NOTHING_WRITTEN} ' .. KEYS[${usage}] .. ' field ' .. ARGV[${id}] .. ' holds no byte count (an integer from 0 to 2^40)') end
  -- @note The usage hash gone (deleted by another program), made before it was marked counted (\`!counted\`, set by
  -- RETOTAL) or never counted (a fresh store): what tenants hold may not be in it, and no write may be charged from 0.
  -- Counted again from the tenants' data first (RECOUNT_TENANT): read as 0, every byte stored was free again, one budget
  -- more per deletion (attack69 F3); told by \`!total\` missing, a new key's first write put \`!total\` back first
  -- (review53 R1); passed when the store seemed to hold nothing (no meta of this tenant, no tenant list), a list deleted
  -- too let the others' data be charged from 0 (attack69 F6). A store holding nothing costs one recount, once.
  if redis.call('HEXISTS', KEYS[${usage}], '!counted') == 0 then return redis.error_reply('RECOUNT') end
  local old = tonumber(oldText or '0')
  local total = tonumber(redis.call('HGET', KEYS[${usage}], '!total') or '0')
  local claims = tonumber(redis.call('HGET', KEYS[${usage}], '!claimed') or '0')
  local budget = tonumber(ARGV[${budget}])
  local floor = tonumber(ARGV[${floor}])
  local floored = old > 0 and redis.call('ZSCORE', KEYS[${usage + 1}], ARGV[${id}]) ~= false
  if ${bytes} > old and total - old + ${bytes} > budget then return redis.error_reply('BUDGET') end
  local before = ${claimed('old', 'floor', 'floored')}
  local keeps = ${bytes} > 0
  local more = ${claimed(bytes, 'floor', 'true')} - before
  if keeps and more > 0 and claims + more > budget then
    local prefix = string.sub(KEYS[${usage}], 1, -6)
    local since = now - ${FLOOR_IDLE_MS}
    local lapsing = redis.call('ZRANGEBYSCORE', KEYS[${usage + 1}], '-inf', '(' .. string.format('%d', since), 'LIMIT', 0, ${FLOOR_LAPSES_PER_WRITE})
    for _, other in ipairs(lapsing) do
      if claims + more <= budget then break end
      if other ~= ARGV[${id}] then
        local stamps = redis.call('HMGET', prefix .. '{' .. other .. '}:meta', 'updated', 'used')
        local last = math.max(tonumber(stamps[1] or '0'), tonumber(stamps[2] or '0'))
        if last >= since then
          redis.call('ZADD', KEYS[${usage + 1}], string.format('%d', last), other)
        else
          redis.call('ZREM', KEYS[${usage + 1}], other)
          local theirs = tonumber(redis.call('HGET', KEYS[${usage}], other) or '0')
          local freed = theirs > 0 and math.max(0, floor - theirs) or 0
          if freed > 0 then
            redis.call('HINCRBY', KEYS[${usage}], '!claimed', string.format('%d', -freed))
            claims = claims - freed
          end
        end
      end
    end
    if claims + more > budget then
      keeps = false
      more = ${bytes} - before
      if ${bytes} > old and claims + more > budget then return redis.error_reply('KEPT') end
    end
  end
  redis.call('HINCRBY', KEYS[${usage}], '!total', string.format('%d', ${bytes} - old))
  redis.call('HINCRBY', KEYS[${usage}], '!claimed', string.format('%d', more))
  if ${bytes} > 0 then redis.call('HSET', KEYS[${usage}], ARGV[${id}], string.format('%d', ${bytes})) else redis.call('HDEL', KEYS[${usage}], ARGV[${id}]) end
  if keeps then redis.call('ZADD', KEYS[${usage + 1}], string.format('%d', now), ARGV[${id}]) else redis.call('ZREM', KEYS[${usage + 1}], ARGV[${id}]) end
end`

/** The keys a create's and a state write's script write, of the types they hold (see {@link typesBeforeWriting}). */
const TENANT_KEY_TYPES = typesBeforeWriting([
  // `next` (the next id) is checked again by the create: a safe integer, 1 or more.
  ['KEYS[1]', 'hash', ['next']],
  ['KEYS[2]', 'list'],
  ['KEYS[3]', 'hash', ['!seq']],
  ['KEYS[4]', 'zset'],
  ['KEYS[5]', 'hash', ['!total', '!claimed', '!journals']],
  ['KEYS[6]', 'zset'],
  ['KEYS[7]', 'zset'],
])

/**
 * Writes a tenant's whole state. KEYS: meta, cats, ops, opt (its outcome record), then the usage
 * hash and the floors with a store budget. ARGV: the operation id (empty for `init`, which is not recorded: it
 * writes only what is not there); how long to keep its outcome on record (ms); mode (`init`: only
 * when the tenant has none yet; `replace`; `default`: back on the default seed, so its keys go),
 * scenario, next id, the store budget (bytes), what the tenant's own record counts against it
 * (`tenantStoredBytes`), ttl ms, the tenant's id, the tenant floor (bytes), the most entries
 * its outcome record keeps, the state's version (a fresh random token, kept in the meta's `state`
 * field until the next state write: a list read in pages checks it, {@link READ_HEAD}), then the
 * categories as JSON. Each category counts the bytes of its JSON as written here (Lua's `#`), plus
 * {@link CATEGORY_OVERHEAD}, the rule of `stored-bytes.ts`. Refuses with BUDGET or KEPT
 * ({@link charge}), VOID when the operation was declared never applied, LATE when it reached
 * Redis once that could have been forgotten (`replayOutcome`). A switch or reset is
 * recorded under its operation id (`redis-outcomes.ts`), so that one whose reply was lost is
 * settled as a create is.
 */
const WRITE_STATE = redisScript(`
${TENANT_KEY_TYPES}
if ARGV[1] ~= '' then
  ${replayOutcome('KEYS[3]', 1, 2).replaceAll('\n', '\n  ')}
end
if ARGV[3] == 'init' and redis.call('EXISTS', KEYS[1]) == 1 then return '0' end
local bytes = 0
if ARGV[3] ~= 'default' then
  bytes = tonumber(ARGV[7])
  for i = 13, #ARGV do bytes = bytes + ${CATEGORY_OVERHEAD} + #ARGV[i] end
end
${charge(5, 9, 'bytes', 6, 10)}
redis.call('DEL', KEYS[1], KEYS[2])
${NOW}
if ARGV[3] ~= 'default' then
  for i = 13, #ARGV, ${PUSH_CHUNK} do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + ${PUSH_CHUNK - 1}, #ARGV)))
  end
  redis.call('HSET', KEYS[1], 'scenario', ARGV[4], 'next', ARGV[5], 'updated', string.format('%d', now), 'state', ARGV[12])
  ${renewTtl(8).replaceAll('\n', '\n  ')}
end
if ARGV[1] ~= '' then
  ${recordOutcome('KEYS[3]', 'KEYS[4]', 1, 2, 11, "'1'").replaceAll('\n', '\n  ')}
end
return '1'
`)

/**
 * Creates a category under the tenant's next id. KEYS: meta, cats, ops, opt, then the usage hash
 * and the floors with a store budget. ARGV: the category's JSON after its `{`, prefixed with a comma; the
 * operation id; ttl ms; the most categories the tenant may hold (-1: no limit); how long to keep
 * the outcome on record (ms); the store budget (bytes); {@link CATEGORY_OVERHEAD}; the tenant's
 * id; the tenant floor (bytes); the most entries the outcome record keeps; then what
 * {@link COUNT_LOOSELY} reads (the beat counted loosely with the category). The category counts the bytes of the JSON the script writes
 * (Lua's `#`: a control character escaped as `\u0001` counts 6) plus that overhead
 * (the rule of `stored-bytes.ts`). Refuses with BUDGET or KEPT ({@link charge})
 * when the category would take the store past its budget.
 * Refuses with NOSEED when the tenant has no state yet (the caller writes its seed with `init`,
 * then retries), IDSPACE past the safe integers, LIMIT at the category limit, VOID when the
 * operation was declared never applied, and LATE when it reached Redis once that could have been
 * forgotten (`redis-outcomes.ts`). The id created is kept on record under
 * the operation id, so that a caller that got no answer can ask whether it was applied.
 */
const CREATE = redisScript(`
${TENANT_KEY_TYPES}
${replayOutcome('KEYS[3]', 2, 5)}
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOSEED') end
local id = tonumber(redis.call('HGET', KEYS[1], 'next'))
if id > 9007199254740991 then return redis.error_reply('IDSPACE') end
-- @note Of the right type, a next id below 1 was handed out (attack27 F3: -3 created as id -3).
if id < 1 then return redis.error_reply('${NOTHING_WRITTEN} ' .. KEYS[1] .. ' field next holds no id') end
local max = tonumber(ARGV[4])
if max >= 0 and redis.call('LLEN', KEYS[2]) >= max then return redis.error_reply('LIMIT') end
local created = string.format('%d', id)
local entry = '{"id":' .. created .. ARGV[1]
if KEYS[5] then
  local held = count_of(redis.call('HGET', KEYS[5], ARGV[8])) + tonumber(ARGV[7]) + #entry
  ${charge(5, 8, 'held', 6, 9).replaceAll('\n', '\n  ')}
end
${NOW}
redis.call('HSET', KEYS[1], 'next', string.format('%d', id + 1), 'updated', string.format('%d', now))
redis.call('RPUSH', KEYS[2], entry)
${recordOutcome('KEYS[3]', 'KEYS[4]', 2, 5, 10, 'created')}
${renewTtl(3)}
${COUNT_LOOSELY}
return created
`)

/**
 * What every request of a replica reads first: the tenant's scenario (KEYS[1], its meta; nil on
 * the default seed) and whether its planned answers' list (KEYS[2]) exists. One round trip for
 * both: a tenant that planned nothing is then asked for no plan (`redis-answers.ts`).
 */
const LOOK = redisScript(`
return { redis.call('HGET', KEYS[1], 'scenario'), redis.call('EXISTS', KEYS[2]) }
`)

/** Records a use of a tenant that has state (its last use, and its keys' TTL renewed). ARGV: ttl ms. */
const TOUCH = redisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
${NOW}
redis.call('HSET', KEYS[1], 'used', string.format('%d', now))
${renewTtl(1)}
return 1
`)

/**
 * Stamps a tenant in the registry (KEYS[1]) with Redis's time: ARGV[1] the tenant id, ARGV[2]
 * `XX` to only update one already there (a use), or `any` (a write).
 */
const INDEX = redisScript(`
${NOW}
if ARGV[2] == 'XX' then return redis.call('ZADD', KEYS[1], 'XX', now, ARGV[1]) end
return redis.call('ZADD', KEYS[1], now, ARGV[1])
`)

/**
 * Gives back the share of a tenant (ARGV[1]) whose keys Redis expired by their TTL. KEYS: its
 * meta, its jmeta, the usage hash, the journal weights, the floors. ARGV[2]: the tenant floor.
 * Returns the bytes given back.
 */
const RECONCILE = redisScript(`
${USABLE_COUNT}
local freed = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  local held = count_of(redis.call('HGET', KEYS[3], ARGV[1]))
  redis.call('HDEL', KEYS[3], ARGV[1])
  if held > 0 then
    redis.call('HINCRBY', KEYS[3], '!total', string.format('%d', -held))
    redis.call('HINCRBY', KEYS[3], '!claimed', string.format('%d', -${claimed('held', 'tonumber(ARGV[2])', "redis.call('ZSCORE', KEYS[5], ARGV[1]) ~= false")}))
  end
  redis.call('ZREM', KEYS[5], ARGV[1])
  freed = freed + held
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  ${releaseJournal('KEYS[3]', 'KEYS[4]', 1)}
  freed = freed + held
end
return freed
`)

/**
 * Sets the usage hash's totals (KEYS[1]: `!total` of data, `!claimed`, `!journals`) from its
 * tenants' fields, the floors (KEYS[3]) and the journal weights (KEYS[2]), in one step: heals a
 * count that drifted, and counts a hash written before journals were counted apart (when `!total`
 * held both), before floors (no `!claimed`), before floors lapsed (no `Pfloors`: its tenants
 * hold no floor until their next write) or before journal weights had their sorted set
 * (`<id>:j` fields, moved into it). Forgets the floors and journal uses (KEYS[4]) of tenants
 * that hold no data or no slot any more. ARGV[1]: the tenant floor. ARGV[2]: a recount's token ({@link BEGIN_RECOUNT}),
 * or '' (the sweep): with a token, refused (RESTART, nothing written) unless the hash still holds it, and then marked
 * counted; without one, marked counted only if it was.
 * @note Marked counted whatever the hash held, a hash deleted (again) while the recount went through the tenants, or
 * during the sweep, was marked holding only what was counted after the deletion: one delete 80-480 ms into a recount of
 * 2,000 tenants left the total 1-25% short for good (attack72 F1: 195% of a 2 MiB budget stored).
 */
const RETOTAL = redisScript(`
${USABLE_COUNT}
local counted = redis.call('HEXISTS', KEYS[1], '!counted') == 1
if ARGV[2] ~= '' then
  if redis.call('HGET', KEYS[1], '!recount') ~= ARGV[2] then return redis.error_reply('RESTART') end
  counted = true
end
local flat = redis.call('HGETALL', KEYS[1])
local floor = tonumber(ARGV[1])
local data, claimed, journals = 0, 0, 0
for i = 1, #flat, 2 do
  local field = flat[i]
  if string.sub(field, 1, 1) ~= '!' then
    -- A tenant's count of no use counts 0, as its delete gives back (its own writes are refused until then).
    local bytes = count_of(flat[i + 1])
    if string.sub(field, -2) == ':j' then
      redis.call('HDEL', KEYS[1], field)
      if bytes > 0 then redis.call('ZADD', KEYS[2], 'NX', string.format('%d', bytes), string.sub(field, 1, -3)) end
    else
      data = data + bytes
      claimed = claimed + ${claimed('bytes', 'floor', "redis.call('ZSCORE', KEYS[3], field) ~= false")}
    end
  end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if tonumber(redis.call('HGET', KEYS[1], id) or '0') == 0 then redis.call('ZREM', KEYS[3], id) end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if not redis.call('ZSCORE', KEYS[2], id) then redis.call('ZREM', KEYS[4], id) end
end
local weights = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 2, #weights, 2 do journals = journals + count_of(weights[i]) end
-- @note Never a total the scripts cannot hold exactly: each tenant's count is at most 2^40, so only
-- thousands of them written by hand get here; the totals are left as they were, said by the sweep.
if data > ${2 ** 53} or claimed > ${2 ** 53} or journals > ${2 ** 53} then return redis.error_reply('${NOTHING_WRITTEN} ' .. KEYS[1] .. ': the counts of its tenants sum past 2^53') end
redis.call('HDEL', KEYS[1], '!jtenants')
redis.call('HSET', KEYS[1], '!total', string.format('%d', data), '!claimed', string.format('%d', claimed), '!journals', string.format('%d', journals))
if counted then redis.call('HSET', KEYS[1], '!counted', '1') end
if ARGV[2] ~= '' then redis.call('HDEL', KEYS[1], '!recount') end
return data
`)

/**
 * Begins counting the usage hash (KEYS[1]) again: nil when it is counted (`!counted`), else the recount's token
 * (`!recount`): ARGV[1], or the one another recount under way set (recounts of several replicas count under one token,
 * each count a tenant's whole). A deletion of the hash takes the token with it: the counts after it are refused
 * (RECOUNT_TENANT, RETOTAL: RESTART), and the recount begins again.
 */
const BEGIN_RECOUNT = redisScript(`
if redis.call('HEXISTS', KEYS[1], '!counted') == 1 then return false end
redis.call('HSETNX', KEYS[1], '!recount', ARGV[1])
return redis.call('HGET', KEYS[1], '!recount')
`)

/** The most categories {@link RECOUNT_TENANT} reads at once. */
const RECOUNT_PAGE = 512

/**
 * Counts what tenant ARGV[1] holds from its own keys (KEYS[1] its meta, KEYS[2] its categories) into the usage hash
 * (KEYS[3]), as the scripts that write it count ({@link charge}: ARGV[2] its record, `tenantStoredBytes`'s overhead,
 * plus its id and scenario; ARGV[3] each category's overhead, plus its JSON): after the usage hash was lost. Read in
 * pages of the list, so that no page holds more than {@link RECOUNT_PAGE} entries. Returns what it counted (0: no data).
 * ARGV[4]: the recount's token ({@link BEGIN_RECOUNT}): refused (RESTART) once the hash no longer holds it.
 */
const RECOUNT_TENANT = redisScript(`
if redis.call('HGET', KEYS[3], '!recount') ~= ARGV[4] then return redis.error_reply('RESTART') end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local bytes = tonumber(ARGV[2]) + #ARGV[1] + #(redis.call('HGET', KEYS[1], 'scenario') or '')
local length = redis.call('LLEN', KEYS[2])
for from = 0, length - 1, ${RECOUNT_PAGE} do
  for _, entry in ipairs(redis.call('LRANGE', KEYS[2], from, from + ${RECOUNT_PAGE - 1})) do bytes = bytes + tonumber(ARGV[3]) + #entry end
end
redis.call('HSET', KEYS[3], ARGV[1], string.format('%d', bytes))
return bytes
`)

/** Whether `error` (as a command's failure says it) is Redis's ACL refusing the sandbox's user a command or key. */
function refusedByAcl(error: unknown): boolean {
  return /NOPERM|no permissions/i.test(error instanceof Error ? error.message : String(error))
}

/** How many times a recount begins again when the usage hash is deleted while it counts (see RedisStorage's #recountUsage). */
const RECOUNT_ATTEMPTS = 3

/** A write refused twice for a usage hash gone (see RedisStorage's #recountUsage): 503, to be sent again. */
function recountRefusal(usage: string | undefined): StorageUnavailableError {
  return new StorageUnavailableError(`Redis: the store budget's count ${usage ?? ''} was gone again while it was counted again: the write was not applied`)
}

/** The registry's tenants (KEYS[1]) not stamped for ARGV[1] ms by Redis's time. */
const IDLE = redisScript(`
${NOW}
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now - tonumber(ARGV[1])))
`)

/** Reads a tenant: nil when it has no state (default seed), else its scenario and how many categories it holds. */
const READ = redisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return {redis.call('HGET', KEYS[1], 'scenario'), redis.call('LLEN', KEYS[2])}
`)

/**
 * What one command of a list read aims to return at most, in bytes of categories' JSON: Redis
 * runs one command at a time, and one `LRANGE 0 -1` of a 44 MB list (20,000 categories at their
 * longest, within the default limits) held every other command of every replica for the whole
 * reply, and its reply took 260 MB and more of output buffers (attack7 K2). A page is a plain
 * `LRANGE` of as many entries as the page's bytes hold by the largest entry of the page before
 * (at most {@link LIST_PAGE_ENTRIES}; {@link LIST_FIRST_PAGE} for the first): 256 KiB takes Redis
 * about 50 µs, and a 44 MB list read in such pages about 15 ms of Redis's time in all, against
 * 39 ms in one command (`bench/redis-long-lists.ts`).
 */
export const LIST_PAGE_BYTES = 256 * 1024
/**
 * The most categories one page holds: so a page is at most this many of the largest categories
 * the limits allow (128 × 13.2 KB of JSON when every character is escaped), whatever came before.
 */
export const LIST_PAGE_ENTRIES = 128
/** The categories of a list read's first page, read with the tenant's scenario and state ({@link READ_HEAD}). */
const LIST_FIRST_PAGE = 16
/** How many times a list read starts over when its tenant's state is replaced while it reads, before it answers 503. */
export const LIST_READ_ATTEMPTS = 4

/**
 * The head of a list read. KEYS: meta, cats. ARGV[1]: how many categories to read. Returns nil
 * when the tenant has no state (default seed, deleted, expired), else its scenario, its state's
 * version (the meta's `state`, a random token set by every state write; `-` when written by an
 * older version), its list's length, and its first ARGV[1] categories.
 * @note Only a state write (a new version, never one seen before) or a delete removes or moves
 * entries; a create appends. So when the version is the same after the last page, it was the
 * same throughout, and the entries below the head's length were those the head saw: a read in
 * pages is the list as it was at its head, or is started over.
 */
const READ_HEAD = redisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local meta = redis.call('HMGET', KEYS[1], 'scenario', 'state')
return {meta[1], meta[2] or '-', redis.call('LLEN', KEYS[2]), redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)}
`)

/**
 * Deletes a tenant's keys (KEYS 1 to 8: its own outcome record the 6th and 7th, never the shared
 * one; its planned answers' list the 8th; ARGV[1]: only when its
 * last write and last use are older than this many ms by Redis's time, or `any`); `1` when it had
 * state. ARGV[2] is the tenant's id. KEYS[9] and KEYS[10] are the outcome record its writes use
 * (on a Cluster, the 6th and 7th again), and ARGV[4] the operation id, ARGV[5] how long to keep
 * its outcome on record (ms), ARGV[6] the most entries it keeps: an admin's delete is recorded
 * (attack7 K4: one whose reply was lost is settled, not answered 503 once applied), the sweep's
 * is not (ARGV[4] empty). But on a Cluster (no plan book there, nor a store budget),
 * KEYS[11] and KEYS[12] are the plan book (its plans leave the count); with a store budget,
 * KEYS[13] is the usage hash, KEYS[14] the journal weights, KEYS[15] the floors and ARGV[3] the
 * tenant floor: its share, its floor and its journal's slot are given back.
 */
const DELETE = redisScript(`
${USABLE_COUNT}
if ARGV[4] ~= '' then
  ${replayOutcome('KEYS[9]', 4, 5).replaceAll('\n', '\n  ')}
end
-- A meta of another type (written by hand: attack24 R5-2) is a tenant to delete, not an error.
local updated, used
local metaType = redis.call('TYPE', KEYS[1])['ok']
if metaType == 'hash' then
  updated = redis.call('HGET', KEYS[1], 'updated')
  used = redis.call('HGET', KEYS[1], 'used')
elseif metaType ~= 'none' then
  updated = '0'
end
${NOW}
if ARGV[1] ~= 'any' and updated and math.max(tonumber(updated), tonumber(used or 0)) >= now - tonumber(ARGV[1]) then return '0' end
if KEYS[11] then
  ${leaveBook('KEYS[11]', 'KEYS[12]', 'KEYS[8]', 2).replaceAll('\n', '\n  ')}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
if KEYS[13] then
  local data = count_of(redis.call('HGET', KEYS[13], ARGV[2]))
  redis.call('HDEL', KEYS[13], ARGV[2])
  if data > 0 then
    redis.call('HINCRBY', KEYS[13], '!total', string.format('%d', -data))
    redis.call('HINCRBY', KEYS[13], '!claimed', string.format('%d', -${claimed('data', 'tonumber(ARGV[3])', "redis.call('ZSCORE', KEYS[15], ARGV[2]) ~= false")}))
  end
  redis.call('ZREM', KEYS[15], ARGV[2])
  ${releaseJournal('KEYS[13]', 'KEYS[14]', 2)}
end
local had = updated and '1' or '0'
if ARGV[4] ~= '' then
  ${recordOutcome('KEYS[9]', 'KEYS[10]', 4, 5, 6, 'had').replaceAll('\n', '\n  ')}
end
return had
`)

/** The keys of one tenant, all with its hash tag. */
export interface TenantKeys {
  readonly meta: string
  readonly categories: string
  readonly journal: string
  readonly journalSizes: string
  readonly journalMeta: string
  /**
   * The outcome record the tenant's writes use (`redis-outcomes.ts`), by operation id (hash) and
   * when each was recorded (sorted set): `Pops` and `Popt`, shared by all tenants, but on a
   * Redis Cluster (the tenant's own, {@link ownOutcomes}).
   */
  readonly outcomes: string
  readonly outcomeTimes: string
  /** The most entries {@link outcomes} keeps (`OUTCOME_RECORD_TOTAL`, or `OUTCOME_RECORD_ENTRIES` on a Cluster). */
  readonly outcomeEntries: number
  /** How long {@link outcomes} keeps each entry (ms). */
  readonly outcomeMs: number
  /** The tenant's own outcome record (`P{id}:ops`, `P{id}:opt`): in use on a Cluster; elsewhere left by an older version, deleted with the tenant. */
  readonly ownOutcomes: readonly [string, string]
  /** Planned answers (`redis-answers.ts`). */
  readonly answers: string
}

/**
 * Connects to Redis and returns the storage. Refuses with a `PetstoreError` when `redis` is not
 * installed, the URL is bad, or Redis does not answer.
 */
export async function openRedisStorage(options: RedisStorageOptions): Promise<RedisStorage> {
  const prefix = options.prefix ?? DEFAULT_REDIS_PREFIX
  // @note A brace in the prefix is a hash tag of its own (`sandbox}:`, `a{b}:`): the epoch's beat
  // then fell in another slot than its token (attack35 F3's precondition), or every tenant in one (attack39 F5).
  if (/[{}]/.test(prefix) && parseRedisUrl(options.url).mode === 'cluster') {
    throw new PetstoreError('invalid_option', `Cannot use the Redis key prefix ${JSON.stringify(prefix)} on a Redis Cluster: a { or } in it makes a hash tag of its own, which puts keys the sandbox keeps together in different slots; choose a prefix without braces`)
  }
  let budget = options.storedBytesBudget
  if (budget !== undefined && parseRedisUrl(options.url).mode === 'cluster') {
    // @note A tenant's script may only touch its own slot: it cannot read what the other tenants hold.
    options.warn?.('the store budget is not enforced on a Redis Cluster: the script writing a tenant cannot count what the other tenants hold (other slots); bound Redis with maxmemory and noeviction')
    budget = undefined
  }
  if (parseRedisUrl(options.url).mode === 'cluster') {
    // @note The same reason: the plan book is one sorted set, in a slot of its own; so is the shared outcome record.
    options.warn?.(`the cap on planned answers over all tenants (${options.maxPlans ?? MAX_BOOK_PLANS}) is not enforced on a Redis Cluster (the plan book is in another slot than a tenant's plans); each tenant still holds at most ${MAX_PLANNED_ANSWERS}`)
    options.warn?.(`the cap on write outcomes on record over all tenants (${OUTCOME_RECORD_TOTAL}) is not enforced on a Redis Cluster (the shared record is in another slot than a tenant's keys); each tenant still keeps at most ${OUTCOME_RECORD_ENTRIES}, and its record (about 570 bytes for one write) an hour after its last write`)
  }
  const shared = sharedKeysOf(prefix, budget !== undefined, parseRedisUrl(options.url).mode === 'cluster')
  // What the write probe asks the ACL for besides its own: each shared key, written, and the sweep's scans (attack63 F2, F3).
  const probeAlso = [
    ...Object.values(shared)
      .filter((key) => key !== undefined)
      .map((key) => ['SET', key] as const),
    ['ZSCAN', shared.registry] as const,
    ...(shared.usage === undefined ? [] : [['HSCAN', shared.usage] as const]),
    ...(shared.weights === undefined ? [] : [['ZSCAN', shared.weights] as const]),
  ]
  const link = await connectRedis({ url: options.url, commandTimeoutMs: options.commandTimeoutMs, warn: options.warn, allowEviction: options.allowEviction, allowFailoverLoss: options.allowFailoverLoss, replicas: options.replicas, epoch: options.epoch, replacing: options.replacing, probeAlso, onEpoch: options.onEpoch, unreachableAtStart: options.unreachableAtStart, probeKey: `${options.prefix ?? DEFAULT_REDIS_PREFIX}write-probe`, replicasKey: `${options.prefix ?? DEFAULT_REDIS_PREFIX}replicas`, epochKey: `${options.prefix ?? DEFAULT_REDIS_PREFIX}epoch` })
  return new RedisStorage(link, { ...options, storedBytesBudget: budget })
}

/** The keys every tenant's writes share, by the store's prefix (one list for the store and the write probe). */
function sharedKeysOf(prefix: string, budgeted: boolean, cluster: boolean) {
  return {
    registry: `${prefix}tenants`,
    usage: budgeted ? `${prefix}usage` : undefined,
    weights: budgeted ? `${prefix}jweights` : undefined,
    floors: budgeted ? `${prefix}floors` : undefined,
    journalUses: budgeted ? `${prefix}jused` : undefined,
    plans: cluster ? undefined : `${prefix}plans`,
    planned: cluster ? undefined : `${prefix}planned`,
    outcomes: cluster ? undefined : `${prefix}ops`,
    outcomeTimes: cluster ? undefined : `${prefix}opt`,
  }
}

export class RedisStorage implements TenantStorage {
  readonly kind = 'redis'
  readonly durable = true
  readonly shared = true
  readonly link: RedisLink
  /** The state of a tenant that has no keys (this process's start scenario's seed: see {@link setSeed}). */
  seed: TenantState
  readonly ttlMs: number
  readonly prefix: string
  readonly #journalBytes: number
  readonly #registry: string
  #seedJson: string[]
  /** The default seeds replaced by {@link setSeed} (held weakly). */
  readonly #formerSeeds = new WeakSet<TenantState>()
  /** The usage hash (`Pusage`: tenant id → data held, `!total` → all tenants' data, `!claimed`, `!journals` → all journals' weight), with a budget. */
  readonly #usage: string | undefined
  /** The last reading of the shared keys' types (see {@link #sharedKeyOfWrongType}). */
  #typesRead: { readonly at: number; readonly wrong: Promise<string | undefined> } | undefined
  /** What the operator was last told of the shared keys' types: the key found wrong, or undefined. */
  #typesSaid: string | undefined
  readonly #warn: (message: string) => void
  /** The journal weights (`Pjweights` sorted set: tenant id → its journal's weight; a member holds a slot), with a budget. */
  readonly #weights: string | undefined
  /** The floors (`Pfloors` sorted set: the tenants holding their floor, id → last write by Redis's time), with a budget. */
  readonly #floors: string | undefined
  /** When each journal last recorded (`Pjused` sorted set, by Redis's time): a slot idle past {@link FLOOR_IDLE_MS} can be taken. */
  readonly #journalUses: string | undefined
  /** Whether the ACL refused the sandbox's user SCAN (see {@link #eachTenantByKey}): the sweep's rebuild of the tenant list is not tried again. */
  #scanRefused = false
  /** The usage hash counted again, under way (see {@link #recountUsage}). */
  #recounting: Promise<void> | undefined
  readonly #budget: number
  /** The room kept for each tenant holding data ({@link tenantFloorBytes}). */
  readonly #floor: number
  /** The plan book (`Pplans`, `Pplanned`), but on a Cluster. */
  readonly #book: PlanBookKeys | undefined
  /** The outcome record shared by all tenants (`Pops`, `Popt`), but on a Cluster (each tenant's own there). */
  readonly #outcomes: OutcomeKeys | undefined
  /** How long the outcome records keep each entry (ms). */
  readonly #outcomeMs: number

  constructor(link: RedisLink, options: RedisStorageOptions) {
    this.link = link
    this.#warn = options.warn ?? (() => undefined)
    this.seed = options.seed
    this.ttlMs = Math.max(0, Math.round(options.ttlMs ?? 0))
    this.prefix = options.prefix ?? DEFAULT_REDIS_PREFIX
    this.#journalBytes = options.journalBytes ?? DEFAULT_JOURNAL_BYTES
    const shared = sharedKeysOf(this.prefix, options.storedBytesBudget !== undefined, link.cluster)
    this.#registry = shared.registry
    this.#seedJson = options.seed.categories.map((category) => JSON.stringify(toCategory(category)))
    this.#budget = options.storedBytesBudget ?? -1
    this.#floor = tenantFloorBytes(options.storedBytesBudget ?? Number.POSITIVE_INFINITY)
    this.#usage = shared.usage
    this.#weights = shared.weights
    this.#book = shared.plans === undefined || shared.planned === undefined ? undefined : { tenants: shared.plans, count: shared.planned, prefix: this.prefix, maxPlans: Math.max(MAX_PLANNED_ANSWERS, options.maxPlans ?? MAX_BOOK_PLANS) }
    this.#floors = shared.floors
    this.#outcomeMs = options.outcomeRecordMs ?? OUTCOME_RECORD_MS
    this.#outcomes = shared.outcomes === undefined || shared.outcomeTimes === undefined ? undefined : { outcomes: shared.outcomes, outcomeTimes: shared.outcomeTimes, outcomeEntries: OUTCOME_RECORD_TOTAL, outcomeMs: this.#outcomeMs }
    this.#journalUses = shared.journalUses
  }

  /** The usage hash and the floors as the last keys of a script, when there is a budget. */
  #usageKeys(): string[] {
    return this.#usage === undefined || this.#floors === undefined ? [] : [this.#usage, this.#floors, this.#registry]
  }

  /** The usage hash, the journal weights and the floors as the last keys of a script, when there is a budget. */
  #journalUsageKeys(): string[] {
    return this.#usage === undefined || this.#weights === undefined || this.#floors === undefined ? [] : [this.#usage, this.#weights, this.#floors]
  }

  /** What all tenants' data (categories and state, journals apart) holds in Redis by the budget's count (bytes), or undefined without a budget. */
  async storedBytes(): Promise<number | undefined> {
    if (this.#usage === undefined) return undefined
    return Number((await this.link.call(this.#usage, ['HGET', this.#usage, '!total'])) ?? 0)
  }

  /**
   * @internal What a list of tenant `id` reads from Redis, in bytes, at least: 0 on the default
   * seed (listed from this process), else what its data counts in the usage hash (`stored-bytes.ts`:
   * its categories' JSON and more), or undefined without a budget or a count.
   */
  async heldBy(id: string): Promise<number | undefined> {
    if (!(await this.has(id))) return 0
    if (this.#usage === undefined) return undefined
    const held = (await this.link.call(this.#usage, ['HGET', this.#usage, id])) as string | null
    return held === null ? undefined : Number(held)
  }

  /** The keys of a tenant. */
  keys(id: string): TenantKeys {
    const base = `${this.prefix}{${id}}:`
    return {
      meta: `${base}meta`,
      categories: `${base}cats`,
      journal: `${base}journal`,
      journalSizes: `${base}jsizes`,
      journalMeta: `${base}jmeta`,
      ...(this.#outcomes ?? { outcomes: `${base}ops`, outcomeTimes: `${base}opt`, outcomeEntries: OUTCOME_RECORD_ENTRIES, outcomeMs: this.#outcomeMs }),
      ownOutcomes: [`${base}ops`, `${base}opt`],
      answers: `${base}answers`,
    }
  }

  open(id: string): TenantStore {
    return new RedisTenantStore(this, id)
  }

  journal(id: string, limit: number | undefined): TenantJournal {
    return new RedisJournal(this.link, this.keys(id), {
      limit,
      bytes: this.#journalBytes,
      ttlMs: this.ttlMs,
      usage: this.#usage,
      weights: this.#weights,
      uses: this.#journalUses,
      prefix: this.prefix,
      tenant: id,
      storeBudget: this.#budget,
    })
  }

  /** Nothing to let go of: every tenant lives in Redis, none in this process. */
  release(_id: string): void {}

  async touch(id: string): Promise<void> {
    const keys = this.keys(id)
    // The registry (its own slot: a separate command) orders tenants by last use for expire().
    if ((await this.link.script(TOUCH, [keys.meta, keys.categories], [this.ttlMs])) === 1) {
      await this.link.script(INDEX, [this.#registry], [id, 'XX'])
    }
  }

  async has(id: string): Promise<boolean> {
    return (await this.link.call(this.keys(id).meta, ['EXISTS', this.keys(id).meta])) === 1
  }

  /**
   * Every tenant in the registry, by last write or use (oldest first).
   * @note Read with `ZSCAN`, a page of about 1,000 tenants a command, not one `ZRANGE 0 -1` of
   * every tenant (attack7 K2: one command's work unbounded); a tenant stamped while it reads may
   * come twice (kept once, with its latest stamp).
   */
  async list(): Promise<TenantSummary[]> {
    const stamps = new Map<string, number>()
    let cursor = '0'
    do {
      const [next, flat] = (await this.link.call(this.#registry, ['ZSCAN', this.#registry, cursor, 'COUNT', '1000'])) as [string, string[]]
      cursor = next
      for (let i = 0; i + 1 < flat.length; i += 2) stamps.set(flat[i]!, Math.max(stamps.get(flat[i]!) ?? 0, Number(flat[i + 1])))
    } while (cursor !== '0')
    const entries = [...stamps].map(([id, updatedAt]) => ({ id, updatedAt })).sort((a, b) => a.updatedAt - b.updatedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    const summaries = await Promise.all(
      entries.map(async ({ id, updatedAt }): Promise<TenantSummary | undefined> => {
        const keys = this.keys(id)
        let reply: [string, number] | null
        try {
          reply = (await this.link.script(READ, [keys.meta, keys.categories], [])) as [string, number] | null
        } catch (error) {
          // @note One tenant's key of the wrong type (written by hand) took the list of every
          // tenant down (attack24 R5-2): it is listed, its keys named as broken.
          if (!(error instanceof WrongTypeError)) throw error
          return { id, scenario: '(its keys hold the wrong type of value: DELETE it)', categories: 0, updatedAt }
        }
        if (reply === null) {
          // Its keys expired (TTL) or were deleted elsewhere: the registry forgets it too.
          await this.link.call(this.#registry, ['ZREM', this.#registry, id])
          return undefined
        }
        return { id, scenario: reply[0], categories: reply[1], updatedAt }
      }),
    )
    return summaries.filter((summary) => summary !== undefined)
  }

  async delete(id: string): Promise<boolean> {
    const deleted = await this.#delete(id, 'any')
    // @note Once deleted, answered so even when the registry's entry stays: listings forget a tenant without keys.
    await this.link.call(this.#registry, ['ZREM', this.#registry, id]).catch(() => undefined)
    return deleted
  }

  /** @note Idle by Redis's clock (`TIME`), never this replica's (issue 20 F11). */
  async expire(idleMs: number): Promise<string[]> {
    const ids = (await this.link.script(IDLE, [this.#registry], [Math.round(idleMs)])) as string[]
    const expired: string[] = []
    for (const id of ids) {
      // @note The script checks the last write again: a replica may have written since the index was read.
      if (await this.#delete(id, String(Math.round(idleMs)))) {
        expired.push(id)
        await this.link.call(this.#registry, ['ZREM', this.#registry, id])
      } else if (!(await this.has(id))) {
        await this.link.call(this.#registry, ['ZREM', this.#registry, id])
      }
    }
    if (this.#book !== undefined) await recountPlans(this.link, this.#book)
    await this.#reconcile()
    return expired
  }

  async health(): Promise<StorageHealth> {
    const health = await this.link.ping()
    if (!health.ok) return health
    const wrong = await this.#sharedKeyOfWrongType().catch(() => undefined)
    return wrong === undefined ? health : { ok: false, detail: wrong }
  }

  /**
   * The keys every tenant's writes share, with the type each holds (`none` while absent).
   * @note One of the wrong type (written by hand, another program on the prefix) refused every
   * tenant's creates, reads too for `usage`, while health said ok (attack24 R5-1).
   */
  #sharedKeys(): KeyType[] {
    // On a Cluster the replicas expected are the cluster's own (CLUSTER NODES): the count is not read (attack26 F4).
    const keys: KeyType[] = [[this.#registry, 'zset'], ...(this.link.cluster ? [] : [[this.link.replicasKey, 'hash'] as const])]
    if (this.link.epochKey !== undefined) keys.push([this.link.epochKey, 'string'])
    if (this.link.beatKey !== undefined) keys.push([this.link.beatKey, 'integer'])
    if (this.#outcomes !== undefined) keys.push([this.#outcomes.outcomes, 'hash', ['!seq']], [this.#outcomes.outcomeTimes, 'zset'])
    if (this.#book !== undefined) keys.push([this.#book.tenants, 'zset'], [this.#book.count, 'integer'])
    if (this.#usage !== undefined) keys.push([this.#usage, 'hash', ['!total', '!claimed', '!journals']])
    for (const key of [this.#floors, this.#weights, this.#journalUses]) if (key !== undefined) keys.push([key, 'zset'])
    return keys
  }

  /**
   * Why a shared key holds the wrong type of value (see {@link #sharedKeys}), or undefined: read
   * at most once a second (health checks come in floods), the keys asked together.
   */
  #sharedKeyOfWrongType(): Promise<string | undefined> {
    if (this.#typesRead !== undefined && monotonicNow() - this.#typesRead.at < 1000) return this.#typesRead.wrong
    const keys = this.#sharedKeys()
    // The rule of `typesBeforeWriting`, read here: the shared keys are in other slots than one script may touch on a Cluster.
    const typeOf = async ([key, type, fields = []]: KeyType) => {
      const held = String(await this.link.call(key, ['TYPE', key], OWN))
      if (type === 'integer' && held === 'string') {
        const text = String(await this.link.call(key, ['GET', key], OWN))
        // The beats are integers below 2^53 (at 2^53 the beat is refused: its next would not be told apart).
        const usable = key === this.link.beatKey ? usableBeatText(text) : usableCount(text)
        return usable ? 'integer' : 'string holding no integer'
      }
      if (held !== 'hash' || fields.length === 0) return held
      const values = (await this.link.call(key, ['HMGET', key, ...fields], OWN)) as (string | null)[]
      return values.every((value) => value === null || usableCount(value)) ? 'hash' : `hash whose counts (${fields.join(', ')}) hold no integer`
    }
    const wrong = Promise.all(keys.map(typeOf)).then((held) => {
      const index = held.findIndex((type, i) => type !== 'none' && type !== keys[i]![1])
      if (index === -1) {
        if (this.#typesSaid !== undefined) this.#warn(`storage recovered: ${this.#typesSaid} holds the type of value the sandbox writes again`)
        this.#typesSaid = undefined
        return undefined
      }
      const [key] = keys[index]!
      // @note Deleted under running sandboxes, the beat reads 0, below theirs: Redis taken for gone back in time.
      const remedy =
        key === this.link.replicasKey
          ? REPLICAS_KEY_REMEDY
          : key === this.link.beatKey
            ? 'Redis going back in time (restarted from an older snapshot) is not watched while it holds no beat; stop every sandbox on this Redis, delete it, and start them again'
            : key === this.link.epochKey
              ? // @note Said "writes are refused" while every write was answered 201, the watch off (attack39 F4).
                'the sandbox serves on, but Redis losing its keys or going back in time is not watched while it holds no token (a flush taken for the fix: ids handed out again); stop every sandbox on this Redis, delete it, and start them again'
              : 'every tenant\'s writes are refused until it is deleted'
      const detail = `Redis ${this.link.target.display}: ${key} holds a ${String(held[index])}, not a ${keyTypeName(keys[index]!)} (written by hand, or by another program using the key prefix ${this.prefix}?): ${remedy}`
      if (this.#typesSaid !== key) this.#warn(`storage failing: ${detail}; health says degraded`)
      this.#typesSaid = key
      return detail
    })
    this.#typesRead = { at: monotonicNow(), wrong }
    return wrong
  }

  close(): Promise<void> {
    return this.link.close()
  }

  /** Deletes a tenant (`before`: `any`, an admin's delete, recorded; or the sweep's idle time in ms, not recorded). */
  async #delete(id: string, before: string): Promise<boolean> {
    const keys = this.keys(id)
    const book = this.#book === undefined ? [] : [this.#book.tenants, this.#book.count]
    const all = [keys.meta, keys.categories, keys.journal, keys.journalSizes, keys.journalMeta, ...keys.ownOutcomes, keys.answers, keys.outcomes, keys.outcomeTimes, ...book, ...this.#journalUsageKeys()]
    if (before !== 'any') return String(await this.link.script(DELETE, all, [before, id, this.#floor, '', 0, 0])) === '1'
    const reply = await recordedWrite(this.link, keys, `the delete of tenant ${id}`, DELETE, all, (op, keepMs, entries) => [before, id, this.#floor, op, keepMs, entries])
    return String(reply) === '1'
  }

  /**
   * Gives back the shares of tenants whose keys Redis expired by their TTL (nothing tells a
   * replica when it does): part of every sweep, at start and hourly.
   */
  async #reconcile(): Promise<void> {
    const usage = this.#usage
    const weights = this.#weights
    const floors = this.#floors
    const uses = this.#journalUses
    if (usage === undefined || weights === undefined || floors === undefined || uses === undefined) return this.#rebuildRegistry()
    // The usage hash gone or never counted (a fresh store): counted again (see #recountUsage; it puts the tenants it
    // finds by their keys back in the list, and marks a store holding nothing counted: one scan of the keyspace).
    if (Number(await this.link.call(usage, ['HEXISTS', usage, '!counted'])) === 0) await this.#recountUsage()
    else await this.#rebuildRegistry()
    // The tenants holding data (the usage hash's fields) and those holding a journal slot (the weights).
    for (const [key, scan] of [
      [usage, 'HSCAN'],
      [weights, 'ZSCAN'],
    ] as const) {
      let cursor = '0'
      do {
        const [next, flat] = (await this.link.call(key, [scan, key, cursor, 'COUNT', '500'])) as [string, string[]]
        cursor = next
        const ids = new Set<string>()
        for (let i = 0; i < flat.length; i += 2) if (!flat[i]!.startsWith('!')) ids.add(flat[i]!.replace(/:j$/, ''))
        for (const id of ids) {
          const keys = this.keys(id)
          await this.link.script(RECONCILE, [keys.meta, keys.journalMeta, usage, weights, floors], [id, this.#floor])
        }
      } while (cursor !== '0')
    }
    await this.link.script(RETOTAL, [usage, weights, floors, uses], [this.#floor, ''])
  }

  /**
   * A tenant without keys reads `seed` from now on, through this process: each replica holds its
   * own seed (its own scenario file), so replicas reload their files each for itself.
   */
  setSeed(seed: TenantState): void {
    this.#formerSeeds.add(this.seed)
    this.seed = seed
    this.#seedJson = seed.categories.map((category) => JSON.stringify(toCategory(category)))
  }

  /** @internal The tenant's scenario and how many categories it holds, or undefined when it is on the default seed. */
  async count(id: string): Promise<[string, number] | undefined> {
    const keys = this.keys(id)
    const reply = (await this.link.script(READ, [keys.meta, keys.categories], [])) as [string, number] | null
    return reply ?? undefined
  }

  /**
   * @internal The tenant's scenario and categories (`parse` makes each of their JSON texts), or
   * undefined when it is on the default seed: read in pages of about {@link LIST_PAGE_BYTES}, one
   * command each, so that other commands, of every replica, run between them (attack7 K2), and
   * each page parsed as it comes, so that no more than one page's texts is held.
   * @note One state: the state's version is the same after the last page as at the head, or the
   * read starts over (at most {@link LIST_READ_ATTEMPTS} times, then `StorageUnavailableError`),
   * so that a list is never made of two states (a reset or switch between pages); creates since
   * the head are left out, as if they came after the read.
   */
  async readList<T>(id: string, parse: (text: string) => T): Promise<[scenario: string, categories: T[]] | undefined> {
    const { meta, categories: list } = this.keys(id)
    for (let attempt = 0; attempt < LIST_READ_ATTEMPTS; attempt++) {
      const head = (await this.link.script(READ_HEAD, [meta, list], [LIST_FIRST_PAGE])) as [scenario: string, version: string, length: number, entries: string[]] | null
      if (head === null) return undefined
      const [scenario, version, length, first] = head
      const categories = first.map(parse)
      let page = first
      while (categories.length < length) {
        const largest = page.reduce((most, text) => Math.max(most, Buffer.byteLength(text)), 1)
        const from = categories.length
        const until = Math.min(length, from + Math.max(1, Math.min(LIST_PAGE_ENTRIES, Math.floor(LIST_PAGE_BYTES / largest))))
        page = (await this.link.call(list, ['LRANGE', list, String(from), String(until - 1)])) as string[]
        for (const text of page) categories.push(parse(text))
        // Shorter than asked: the list was replaced or deleted since the head.
        if (page.length < until - from) break
      }
      if (categories.length === length) {
        if (length <= LIST_FIRST_PAGE) return [scenario, categories]
        const [still, now] = (await this.link.call(meta, ['HMGET', meta, 'scenario', 'state'])) as [string | null, string | null]
        if (still !== null && (now ?? '-') === version) return [scenario, categories]
      }
    }
    throw new StorageUnavailableError(`Redis: the categories of tenant ${id} were replaced ${LIST_READ_ATTEMPTS} times while being read`)
  }

  /** @internal The planned answers of tenant `id` (its `answers` list). */
  answersOf(id: string): RedisAnswers {
    return new RedisAnswers(this.link, this.keys(id), this.ttlMs, id, this.#book)
  }

  /** @internal The tenant's scenario, and whether its planned answers' list exists: one script, one round trip. */
  async look(id: string): Promise<[scenario: string, planned: boolean]> {
    const keys = this.keys(id)
    const [name, planned] = (await this.link.script(LOOK, [keys.meta, keys.answers], [])) as [string | null, number]
    return [name ?? this.seed.scenario, planned === 1]
  }

  /** @internal Writes the default seed for a tenant that has no state yet (nothing when it has). */
  async seedIfNew(id: string): Promise<void> {
    await this.#writeState(id, 'init', this.seed)
  }

  /**
   * @internal Creates a category; writes the default seed first when the tenant has none.
   * A create sent and never answered (a timeout, a connection dropped after sending) is settled
   * before answering: see {@link settle}.
   */
  async create(id: string, input: NewCategory, maxCategories: number): Promise<Category> {
    const keys = this.keys(id)
    const category = input.description === undefined ? { name: input.name } : { name: input.name, description: input.description }
    const rest = `,${JSON.stringify(category).slice(1)}`
    // The time it is sent at, at most: a resend after NOSEED carries the first one's (earlier: safe), and its deadline.
    let operation = await newOperation(this.link, keys.meta)
    let { op, until } = operation
    let moved = false
    let recounted = false
    for (let attempt = 0; ; attempt++) {
      try {
        const limit = Number.isFinite(maxCategories) ? maxCategories : -1
        let reply: unknown
        const known = lastRecordedOp(this.link, keys.outcomes)
        try {
          reply = await this.link.script(CREATE, [keys.meta, keys.categories, keys.outcomes, keys.outcomeTimes, ...this.#usageKeys()], [rest, op, this.ttlMs, limit, keys.outcomeMs, this.#budget, CATEGORY_OVERHEAD, id, this.#floor, keys.outcomeEntries], { confirm: true, countsLoosely: true })
          noteRecorded(this.link, keys.outcomes, op)
        } catch (error) {
          if (!(error instanceof RedisOutcomeUnknown)) throw error
          reply = await settleOutcome(this.link, keys, op, error, `create ${op} of tenant ${id}`, until, known)
        }
        // @note Once applied, the create is answered 201 even when the registry's stamp fails:
        // the registry is an index (the sweep and listings read the tenant's own keys).
        await this.#indexAfterWrite(id, 'any')
        return { id: Number(reply), ...category }
      } catch (error) {
        if (!(error instanceof RedisScriptRefusal)) throw error
        if (error.message === 'IDSPACE') throw new IdSpaceExhaustedError('the next category id is not a safe integer')
        if (error.message === 'LIMIT') throw new CategoryLimitError(maxCategories)
        if (error.message === 'BUDGET') throw storeFull()
        if (error.message === 'KEPT') throw storeKept()
        if (error.message === 'RECOUNT' && !recounted) {
          recounted = true
          await this.#recountUsage()
          continue
        }
        if (error.message === 'RECOUNT') throw recountRefusal(this.#usage)
        if (error.message === 'VOID') throw new StorageUnavailableError(`Redis: create ${op} of tenant ${id} was declared not applied`)
        if (error.message === 'LATE') {
          // Once, when timed by another clock (attack13 T3, T4; attack9 R4): late, so never applied; sent again, timed anew.
          if (moved || !(await timedByAnotherClock(this.link, keys.meta, operation))) throw lateWrite(`create ${op} of tenant ${id}`, op)
          moved = true
          operation = await newOperation(this.link, keys.meta)
          ;({ op, until } = operation)
          continue
        }
        // NOSEED: the tenant's first write. Its seed goes in (unless another replica's just did).
        if (attempt > 2) throw new StorageUnavailableError(`Redis: tenant ${id} lost its state while being created`)
        // A tenant on its seed holds the seed's categories: refused before the seed is written, so a 409 leaves nothing (attack8 A3).
        if (this.seed.categories.length >= maxCategories) throw new CategoryLimitError(maxCategories)
        await this.#writeState(id, 'init', this.seed)
      }
    }
  }

  /** @internal Replaces a tenant's state; resolves to whether it now has keys. */
  async replace(id: string, state: TenantState): Promise<boolean> {
    // @note An older version of it too (a reset decided before a --watch save, sent after): written as the tenant's own,
    // the old seed was taken for its data, a writer for good, and read back beside the new version's pets and orders
    // (attack53 F1's Redis variant).
    const toDefault = state === this.seed || this.#formerSeeds.has(state)
    await this.#writeState(id, toDefault ? 'default' : 'replace', toDefault ? this.seed : state)
    await this.#indexAfterWrite(id, toDefault ? 'remove' : 'any')
    return !toDefault
  }

  /**
   * Writes a tenant's state. A switch or reset (`replace`, `default`) is recorded under an
   * operation id: one whose reply was lost is settled (`redis-outcomes.ts`), so it is answered as
   * applied, not applied, or unknown, never "not applied" once Redis ran it (attack2 F3).
   */
  async #writeState(id: string, mode: 'init' | 'replace' | 'default', state: TenantState): Promise<void> {
    const keys = this.keys(id)
    const categories = state === this.seed ? this.#seedJson : state.categories.map((category) => JSON.stringify(toCategory(category)))
    const scriptKeys = [keys.meta, keys.categories, keys.outcomes, keys.outcomeTimes, ...this.#usageKeys()]
    const rest = [mode, state.scenario, state.nextCategoryId, this.#budget, mode === 'default' ? 0 : tenantStoredBytes(id, state.scenario), this.ttlMs, id, this.#floor]
    for (let recounted = false; ; recounted = true) {
      try {
        // Any fresh token: a list read in pages compares it before and after (attack7 K2).
        const version = randomBytes(12).toString('base64url')
        if (mode === 'init') await this.link.script(WRITE_STATE, scriptKeys, ['', 0, ...rest, keys.outcomeEntries, version, ...categories])
        else await recordedWrite(this.link, keys, `the switch or reset of tenant ${id} to scenario ${JSON.stringify(state.scenario)}`, WRITE_STATE, scriptKeys, (op, keepMs, entries) => [op, keepMs, ...rest, entries, version, ...categories])
        return
      } catch (error) {
        if (error instanceof RedisScriptRefusal && error.message === 'BUDGET') throw storeFull()
        if (error instanceof RedisScriptRefusal && error.message === 'KEPT') throw storeKept()
        // Refused before it wrote anything: counted again, then sent again (a new operation).
        if (error instanceof RedisScriptRefusal && error.message === 'RECOUNT') {
          if (recounted) throw recountRefusal(this.#usage)
          await this.#recountUsage()
          continue
        }
        throw error
      }
    }
  }

  /**
   * Calls `visit` with each tenant found by its meta key's name (`SCAN`), until it returns true: the tenant list may be
   * gone (review53 R1). A user the ACL refuses SCAN finds none this way.
   */
  async #eachTenantByKey(visit: (id: string) => Promise<boolean | void>): Promise<void> {
    let cursor = '0'
    try {
      do {
        const [next, found] = (await this.link.call(this.#registry, ['SCAN', cursor, 'MATCH', this.#metaPattern(), 'COUNT', '1000'])) as [string, string[]]
        cursor = next
        for (const key of found) {
          const id = key.slice(this.prefix.length + 1, -'}:meta'.length)
          if (this.keys(id).meta === key && (await visit(id)) === true) return
        }
      } while (cursor !== '0')
    } catch (error) {
      if (!refusedByAcl(error)) throw error
      this.#scanRefused = true
    }
  }

  /** The tenant list found empty (deleted by another program): put back from the tenants' keys (attack69 F6). */
  async #rebuildRegistry(): Promise<void> {
    // A user the ACL refused SCAN once: not asked again at every sweep (each refusal said, then its end).
    if (this.#scanRefused) return
    try {
      if (Number(await this.link.call(this.#registry, ['ZCARD', this.#registry])) === 0) await this.#eachTenantByKey((id) => this.#reindex(id))
    } catch (error) {
      // A user the ACL refuses these: the list stays as it is (the sweep goes on).
      if (!refusedByAcl(error)) throw error
    }
  }

  /**
   * Puts tenant `id`, found by its keys, back in the tenant list (unless there already) with its last write or use.
   * @note Not put back, tenants whose list another program deleted were missing from the admin list until each wrote again,
   * a restart included (attack69 F6).
   */
  async #reindex(id: string): Promise<void> {
    const [updated, used] = (await this.link.call(this.keys(id).meta, ['HMGET', this.keys(id).meta, 'updated', 'used'])) as [string | null, string | null]
    const stamp = Math.max(Number(updated ?? 0) || 0, Number(used ?? 0) || 0)
    if (stamp > 0) await this.link.call(this.#registry, ['ZADD', this.#registry, 'NX', String(stamp), id])
  }

  /** A SCAN pattern matching every tenant's meta key (`P{<id>}:meta`), the prefix's own pattern characters escaped. */
  #metaPattern(): string {
    return `${this.prefix.replace(/[*?[\]\\]/g, (char) => `\\${char}`)}{*}:meta`
  }

  /**
   * Counts again what every tenant in the registry holds, from its own keys, into the usage hash, then its totals
   * ({@link RECOUNT_TENANT}, RETOTAL): once the usage hash is found gone while tenants hold data (a write refused with
   * RECOUNT, or the sweep). One at a time in this process; said once each time.
   * @note Gone unnoticed, each deletion of `Pusage` (a cleanup job by pattern) let the tenants store one more budget,
   * without bound, a restart included (attack69 F3: three budgets past a 2 MiB one after three deletions).
   */
  #recountUsage(): Promise<void> {
    this.#recounting ??= (async () => {
      const [usage, weights, floors, uses] = [this.#usage, this.#weights, this.#floors, this.#journalUses]
      if (usage === undefined || weights === undefined || floors === undefined || uses === undefined) return
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.#recountOnce(usage, weights, floors, uses)
        } catch (error) {
          // Deleted again while counted: counted again from the start (or by another replica meanwhile), a few times.
          if (!(error instanceof RedisScriptRefusal && error.message === 'RESTART')) throw error
          if (attempt === RECOUNT_ATTEMPTS) throw recountRefusal(usage)
        }
      }
    })().finally(() => (this.#recounting = undefined))
    return this.#recounting
  }

  /** One attempt of {@link #recountUsage}: refused (RESTART) when the hash is deleted while it counts. */
  async #recountOnce(usage: string, weights: string, floors: string, uses: string): Promise<void> {
    // Counted meanwhile (another recount, or the sweep's), else the token this recount counts under.
    const token = (await this.link.script(BEGIN_RECOUNT, [usage], [randomUUID()])) as string | null
    if (token === null) return
    const counted = new Set<string>()
    const count = async (id: string) => {
      if (counted.has(id)) return
      const keys = this.keys(id)
      if (Number(await this.link.script(RECOUNT_TENANT, [keys.meta, keys.categories, usage], [id, TENANT_OVERHEAD, CATEGORY_OVERHEAD, token])) === 0) return
      // Said at the first tenant found (a fresh store holding nothing is counted without a word).
      if (counted.size === 0) this.#warn(`storage: the store budget's count ${usage} is gone (deleted by another program?) or was never counted (made by an earlier version) while tenants hold data: counting what each holds again, from its own keys`)
      counted.add(id)
    }
    let cursor = '0'
    do {
      const [next, flat] = (await this.link.call(this.#registry, ['ZSCAN', this.#registry, cursor, 'COUNT', '500'])) as [string, string[]]
      cursor = next
      for (let i = 0; i < flat.length; i += 2) await count(flat[i]!)
    } while (cursor !== '0')
    // Every tenant's meta too, found by its key's name: the tenant list may be gone as well (review53 R1); put back in it.
    await this.#eachTenantByKey(async (id) => {
      const known = counted.has(id)
      await count(id)
      if (!known && counted.has(id)) await this.#reindex(id)
    })
    const tenants = counted.size
    const total = Number(await this.link.script(RETOTAL, [usage, weights, floors, uses], [this.#floor, token]))
    if (tenants > 0) this.#warn(`storage: the store budget's count ${usage} holds again what ${tenants === 1 ? '1 tenant holds' : `${tenants} tenants hold`}: ${total} bytes`)
    // @note Said: the tenants missing from the tenant list went uncounted, and the store budget could be passed with no
    // word of it (attack75 F2: 158% of a 4 MiB budget after the list and the count were deleted together).
    if (this.#scanRefused) {
      this.#warn(`storage: the store budget's count ${usage} was counted again from the tenant list ${this.#registry} alone: the ACL refuses the sandbox's user SCAN, so tenants missing from that list (deleted with it?) are not counted, and the store budget may be passed. Allow SCAN (+scan) to count them.`)
    }
  }

  /**
   * After a tenant's write was applied: records it in the registry (its own slot: a separate
   * command), by Redis's clock, or with `remove` (a tenant back on its seed, no keys) takes it out.
   * Never fails: the write is answered as applied (the registry is an index; the next write or
   * touch records it again).
   * @note A scenario switch applied and then answered 503 when the registry's command failed.
   * @note On a cluster the registry lives on one master, most tenants' keys on others: the write's
   * answer is not held for it. A stalled registry master held every tenant's creates a command
   * timeout each, and refused every switch (attack11 R7).
   */
  async #indexAfterWrite(id: string, mode: 'any' | 'remove'): Promise<void> {
    const indexed = (mode === 'remove' ? this.link.call(this.#registry, ['ZREM', this.#registry, id]) : this.link.script(INDEX, [this.#registry], [id, 'any'])).then(
      () => undefined,
      () => undefined,
    )
    if (!this.link.cluster) await indexed
  }
}

function parseCategory(json: string): Category {
  return toCategory(JSON.parse(json) as Category)
}

/** One tenant's handle: nothing cached, every call asks Redis (another replica may have written). */
class RedisTenantStore implements TenantStore {
  readonly #storage: RedisStorage
  readonly #id: string
  /** True once a write through this handle left more than the default seed. */
  modified = false
  /** Nothing held in this process: the categories are in Redis. */
  readonly heldBytes = 0
  /**
   * Settles once the tenant's state is in Redis (its seed written on its first create).
   * @note Creates wait for it, so that concurrent first creates keep their arrival order
   * instead of racing the seed.
   */
  #seeded: Promise<void> | undefined

  /** The tenant's planned answers, in Redis: its scenario read also says whether any are planned. */
  readonly answers: RedisAnswers

  constructor(storage: RedisStorage, id: string) {
    this.#storage = storage
    this.#id = id
    this.answers = storage.answersOf(id)
  }

  /** Reads the scenario, and tells {@link answers} whether any are planned (see `RedisAnswers`). */
  async scenario(): Promise<string> {
    const ticket = this.answers.reading()
    const [name, planned] = await this.#storage.look(this.#id)
    this.answers.saw(ticket, planned)
    return name
  }

  async listCategories(): Promise<Category[]> {
    const state = await this.#storage.readList(this.#id, parseCategory)
    if (!state) return this.#storage.seed.categories.map(toCategory)
    return state[1]
  }

  async countCategories(): Promise<number> {
    const state = await this.#storage.count(this.#id)
    return state ? state[1] : this.#storage.seed.categories.length
  }

  /** What a list reads from Redis, at least (see `RedisStorage.heldBy`). */
  listTextBytes(): Promise<number | undefined> {
    return this.#storage.heldBy(this.#id)
  }

  async createCategory(input: NewCategory, maxCategories = Number.POSITIVE_INFINITY): Promise<Category> {
    // A seed past the limit is not written: the create is refused on it (NOSEED), leaving nothing (attack8 A3).
    if (!this.#seeded && this.#storage.seed.categories.length < maxCategories) {
      const seeded = this.#storage.seedIfNew(this.#id)
      this.#seeded = seeded
      seeded.catch(() => {
        if (this.#seeded === seeded) this.#seeded = undefined
      })
    }
    await this.#seeded
    const category = await this.#storage.create(this.#id, input, maxCategories)
    this.modified = true
    return category
  }

  async replace(state: TenantState): Promise<void> {
    this.#seeded = undefined
    this.modified = await this.#storage.replace(this.#id, state)
  }
}
