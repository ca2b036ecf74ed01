/**
 * A tenant's request journal in Redis, so that every replica lists every request whichever
 * replica served it. The same rules as the in-memory `RequestJournal`: newest last, ids
 * increasing and kept across `clear()`, the oldest entries dropped past the entry limit or the
 * byte budget (the newest always stays), `all(filter)` filtered by {@link journalMatches}.
 *
 * Keys (with the tenant's hash tag): `journal` (entries as JSON, oldest first), `jsizes` (each
 * entry's weight, in step with `journal`), `jmeta` (`seq`: the last id, `bytes`: the weight held).
 * Recording is one script, so the caps hold whatever replicas write at once.
 */
import {
  DEFAULT_JOURNAL_BYTES,
  DEFAULT_JOURNAL_LIMIT,
  journalMatches,
  journalWeight,
  JournalDraft,
  type JournalEntry,
  type JournalFilter,
  type JournalInput,
  type TenantJournal,
} from '../core/journal.js'
import { NOW, redisScript, type RedisLink } from './redis-connection.js'
import { recordedWrite, recordOutcome, replayOutcome, type OutcomeKeys } from './redis-outcomes.js'
import type { TenantKeys } from './redis-storage.js'
import { tenantFloorBytes } from './stored-bytes.js'

/**
 * KEYS: journal, jsizes, jmeta, then the tenant's meta and categories, then the usage hash with a
 * store budget. ARGV: the entry's JSON after its `{`, prefixed with a comma; its weight; the entry
 * limit; the byte budget; ttl ms; the journals' budget (the store budget); the tenant's id; the
 * journal floor (`tenantFloorBytes` of the journals' budget).
 * With a store budget, journals are counted apart from data (so a request never takes room from
 * any tenant's categories): the journal's weight in the usage hash as `<id>:j`, all journals'
 * as `!journals`, how many tenants hold one as `!jtenants`. When the journals together pass their
 * budget, this journal drops its oldest entries down to its share (the budget over the tenants
 * holding one; the newest always stays): a tenant whose journal is within its share keeps it,
 * whatever other keys' requests left in theirs. A tenant holding no journal records nothing while
 * the journals are past their budget, so that new keys cannot grow Redis by a newest entry each
 * (re-attack: 1,200 new keys' GETs took Redis to maxmemory), nor once one more holder would make
 * the share smaller than the floor: so a share never falls under the floor, and a flood of new
 * keys cannot cut a partner's journal below it.
 * Returns the entry's id (0 when the limit is 0: nothing is kept). A request is a use: the
 * tenant's `used` time and the TTL of all its keys are renewed, so only an unused tenant expires.
 */
const RECORD = redisScript(`
local limit = tonumber(ARGV[3])
local ttl = tonumber(ARGV[5])
if redis.call('EXISTS', KEYS[4]) == 1 then
  ${NOW}
  redis.call('HSET', KEYS[4], 'used', string.format('%d', now))
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[4], ttl)
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
end
if limit == 0 then return 0 end
if KEYS[6] and not redis.call('HGET', KEYS[6], ARGV[7] .. ':j') then
  local full = tonumber(redis.call('HGET', KEYS[6], '!journals') or '0') + tonumber(ARGV[2]) > tonumber(ARGV[6])
  if full or (tonumber(redis.call('HGET', KEYS[6], '!jtenants') or '0') + 1) * tonumber(ARGV[8]) > tonumber(ARGV[6]) then return 0 end
end
local id = redis.call('HINCRBY', KEYS[3], 'seq', 1)
local bytes = redis.call('HINCRBY', KEYS[3], 'bytes', ARGV[2])
redis.call('RPUSH', KEYS[1], '{"id":' .. string.format('%d', id) .. ARGV[1])
local n = redis.call('RPUSH', KEYS[2], ARGV[2])
local budget = tonumber(ARGV[4])
local old = 0
local others = 0
local holders = 1
if KEYS[6] then
  old = tonumber(redis.call('HGET', KEYS[6], ARGV[7] .. ':j') or '0')
  others = tonumber(redis.call('HGET', KEYS[6], '!journals') or '0') - old
  holders = tonumber(redis.call('HGET', KEYS[6], '!jtenants') or '0')
  if old == 0 then holders = holders + 1 end
end
local over = KEYS[6] and others + bytes > tonumber(ARGV[6])
local share = math.floor(tonumber(ARGV[6]) / math.max(holders, 1))
local drop = 0
while n - drop > 1 and (n - drop > limit or bytes > budget or (over and bytes > share)) do
  bytes = bytes - tonumber(redis.call('LINDEX', KEYS[2], drop))
  drop = drop + 1
end
if drop > 0 then
  redis.call('LTRIM', KEYS[1], drop, -1)
  redis.call('LTRIM', KEYS[2], drop, -1)
  redis.call('HSET', KEYS[3], 'bytes', string.format('%d', bytes))
end
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
if KEYS[6] then
  redis.call('HSET', KEYS[6], '!journals', string.format('%d', others + bytes))
  if bytes > 0 then redis.call('HSET', KEYS[6], ARGV[7] .. ':j', string.format('%d', bytes)) else redis.call('HDEL', KEYS[6], ARGV[7] .. ':j') end
  if old == 0 and bytes > 0 then redis.call('HINCRBY', KEYS[6], '!jtenants', 1) end
  if old > 0 and bytes == 0 then redis.call('HINCRBY', KEYS[6], '!jtenants', -1) end
end
return id
`)

/**
 * Lua: gives back what the journal of tenant ARGV[`arg`] counts in the usage hash `usage` (its
 * `<id>:j` entry, `!journals`, `!jtenants`), leaving the bytes in a local `held`.
 */
export const releaseJournal = (usage: string, arg: number) => `local held = tonumber(redis.call('HGET', ${usage}, ARGV[${arg}] .. ':j') or '0')
  redis.call('HDEL', ${usage}, ARGV[${arg}] .. ':j')
  if held > 0 then
    redis.call('HINCRBY', ${usage}, '!journals', string.format('%d', -held))
    redis.call('HINCRBY', ${usage}, '!jtenants', -1)
  end`

/**
 * Empties the journal; the id sequence goes on. KEYS: journal, jsizes, jmeta, ops, opt (the
 * tenant's outcome record), then the usage hash with a store budget. ARGV: the tenant's id, the
 * operation id, how long to keep its outcome on record (ms). Recorded, so that a clear whose reply
 * was lost is settled (`redis-outcomes.ts`).
 */
const CLEAR = redisScript(`
${replayOutcome('KEYS[4]', 2)}
redis.call('DEL', KEYS[1], KEYS[2])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('HSET', KEYS[3], 'bytes', '0') end
if KEYS[6] then
  ${releaseJournal('KEYS[6]', 1)}
end
${NOW}
${recordOutcome('KEYS[4]', 'KEYS[5]', 2, 3, "'1'")}
return '1'
`)

/** Options of {@link RedisJournal}. */
export interface RedisJournalOptions {
  /** @default {@link DEFAULT_JOURNAL_LIMIT} entries */
  readonly limit?: number | undefined
  /** @default {@link DEFAULT_JOURNAL_BYTES} */
  readonly bytes?: number | undefined
  /** The journal's keys expire this long after its last entry; 0: never. @default 0 */
  readonly ttlMs?: number | undefined
  /** With a store budget: the usage hash that counts what every tenant holds. @default none */
  readonly usage?: string | undefined
  /** The tenant's id, its field in {@link usage}. */
  readonly tenant?: string | undefined
  /** What all journals together may weigh (bytes), with {@link usage}: the store budget. */
  readonly storeBudget?: number | undefined
}

export class RedisJournal implements TenantJournal {
  readonly #link: RedisLink
  readonly #keys: readonly string[]
  /** The tenant's id and the store budget, for the usage hash (the last of {@link #keys}). */
  readonly #usageArgs: readonly (string | number)[]
  readonly #usage: string | undefined
  /** The tenant's outcome record, for clears (`redis-outcomes.ts`). */
  readonly #outcomes: OutcomeKeys
  readonly #limit: number
  readonly #budget: number
  readonly #ttlMs: number
  /** Nothing held on this process's heap: the entries are in Redis. */
  readonly bytes = 0

  constructor(link: RedisLink, keys: TenantKeys, options: RedisJournalOptions = {}) {
    this.#link = link
    this.#usage = options.usage
    this.#outcomes = keys
    this.#keys = [keys.journal, keys.journalSizes, keys.journalMeta, keys.meta, keys.categories, ...(options.usage === undefined ? [] : [options.usage])]
    this.#usageArgs = [options.storeBudget ?? -1, options.tenant ?? '', tenantFloorBytes(options.storeBudget ?? Number.POSITIVE_INFINITY)]
    this.#limit = options.limit ?? DEFAULT_JOURNAL_LIMIT
    this.#budget = options.bytes ?? DEFAULT_JOURNAL_BYTES
    this.#ttlMs = options.ttlMs ?? 0
  }

  /**
   * Stores the entry, formatted now, weighed as the in-memory journal weighs it ({@link journalWeight}),
   * so that both keep the same entries under the same budget; settles once Redis has it. `grow`
   * is for the server's heap budget, which entries kept in Redis do not touch.
   */
  async record(input: JournalInput): Promise<void> {
    const entry = input instanceof JournalDraft ? input.fields() : input
    const rest = `,${JSON.stringify(entry).slice(1)}`
    const size = journalWeight(input)
    await this.#link.script(RECORD, this.#keys, [rest, Math.max(0, Math.round(size)), this.#limit, this.#budget, this.#ttlMs, ...this.#usageArgs])
  }

  async all(filter: JournalFilter = {}): Promise<JournalEntry[]> {
    const texts = (await this.#link.call(this.#keys[0], ['LRANGE', this.#keys[0]!, '0', '-1'])) as string[]
    return texts.map((text) => JSON.parse(text) as JournalEntry).filter((entry) => journalMatches(entry, filter))
  }

  async clear(): Promise<void> {
    const keys = [...this.#keys.slice(0, 3), this.#outcomes.outcomes, this.#outcomes.outcomeTimes, ...(this.#usage === undefined ? [] : [this.#usage])]
    await recordedWrite(this.#link, this.#outcomes, `the journal clear of tenant ${this.#usageArgs[1]}`, CLEAR, keys, (op, keepMs) => [this.#usageArgs[1]!, op, keepMs])
  }

  async count(): Promise<number> {
    return (await this.#link.call(this.#keys[0], ['LLEN', this.#keys[0]!])) as number
  }
}
