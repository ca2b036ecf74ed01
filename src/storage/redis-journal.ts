/**
 * A tenant's request journal in Redis, so that every replica lists every request whichever
 * replica served it. The same rules as the in-memory `RequestJournal`: newest last, ids
 * increasing and kept across `clear()`, the oldest entries dropped past the entry limit or the
 * byte budget (the newest always stays), `all(filter)` filtered by {@link journalMatches}.
 *
 * Keys (with the tenant's hash tag): `journal` (entries as JSON, oldest first), `jsizes` (each
 * entry's weight, in step with `journal`), `jmeta` (`seq`: the last id, `bytes`: the weight held).
 * With a store budget, also the usage hash and the journal weights (`Pjweights`), shared by all
 * tenants: see {@link RECORD}. Recording is one script, so the caps hold whatever replicas write at once.
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
import { monotonicNow } from '../core/clock.js'
import { NOTHING_WRITTEN, NOW, redisScript, type RedisLink } from './redis-connection.js'
import { recordedWrite, recordOutcome, replayOutcome, typesBeforeWriting, type OutcomeKeys } from './redis-outcomes.js'
import { FLOOR_IDLE_MS, FLOOR_LAPSES_PER_WRITE, tenantFloorBytes } from './stored-bytes.js'

/**
 * Lua: the keys of tenant `id`'s journal, `kind` being `journal`, `jsizes` or `jmeta`, from the
 * key prefix ARGV[`prefix`] (as `RedisStorage.keys` names them).
 */
const otherKey = (prefix: number, id: string, kind: string) => `ARGV[${prefix}] .. '{' .. ${id} .. '}:${kind}'`

/**
 * KEYS: journal, jsizes, jmeta, then the tenant's meta and categories, then with a store budget
 * the usage hash, the journal weights (sorted set) and the journals' last entries (`Pjused`,
 * sorted set: tenant id → when its journal last recorded, by Redis's time). ARGV: the entry's JSON after its `{`,
 * prefixed with a comma; its weight; the entry limit; the byte budget; ttl ms; the journals'
 * budget (the store budget); the tenant's id; the journal floor (`tenantFloorBytes` of the
 * journals' budget); the key prefix; the entry's deadline (Redis's time, ms): from then on it is
 * not kept (its request was answered without it; a clear answered since must not be overtaken).
 * An entry counts (in `jsizes`, `jmeta`'s `bytes`, the usage hash, `jweights`) its weight, or the
 * bytes of its JSON as written (Lua's `#`) where that is more: so a journal never holds more in
 * Redis than it counts, even of bodies of control characters, each escaped to 6 bytes (`\u0001`;
 * attack2 F1: 12.6 MB of journals held, counted 2.1 MB), and an ordinary entry, lighter as JSON
 * than on the heap, keeps the weight the in-memory journal gives it.
 * With a store budget, journals are counted apart from data (so a request never takes room from
 * any tenant's categories): all journals' weight in the usage hash as `!journals`, each tenant's
 * in the sorted set `jweights` (tenant id → weight). A tenant there holds a **slot**: it keeps it
 * once journaled, with a weight of 0 after a clear, until its journal's keys expire or it is
 * deleted; a new tenant gets one only while the floors of all slots fit in the budget, or by
 * taking the slot of a journal that recorded nothing for {@link FLOOR_IDLE_MS} (its entries go,
 * its id sequence stays, as after a clear), oldest first. Past the
 * budget, room is made in this order, the whole decision in this script so that replicas agree:
 * - the recording journal drops its oldest entries while it is above its share (the budget over
 *   the slots; never under the floor, as slots are bounded); its newest entry alone above its
 *   share is not recorded;
 * - then the largest journals above their floor drop their oldest entries, one at a time, the
 *   largest first, until the new entry fits: a journal within its floor is never cut for another.
 * So a tenant below its floor always records, whatever other keys' requests left in their
 * journals, and the journals never hold more than their budget (issue 20 attack2 F6: a partner
 * that cleared its journal was never journaled again while junk keys' journals filled the budget).
 * Refuses, writing nothing, while a key it uses holds another type of value or a count it cannot
 * use (`typesBeforeWriting`): a journals' total of `1e30` was rewritten wrapped past 2^63, the
 * journals' budget void from then on (attack28 F2).
 * Returns the entry's id (0 when nothing is kept). A request is a use: the tenant's `used` time
 * and the TTL of all its keys are renewed, so only an unused tenant expires.
 */
const RECORD = redisScript(`
${typesBeforeWriting([
  ['KEYS[1]', 'list'],
  ['KEYS[2]', 'list'],
  ['KEYS[3]', 'hash', ['seq', 'bytes']],
  ['KEYS[4]', 'hash'],
  ['KEYS[6]', 'hash', ['!total', '!claimed', '!journals']],
  ['KEYS[7]', 'zset'],
  ['KEYS[8]', 'zset'],
])}
-- @note The tenant's own journal weight, of no use (\`inf\` written by hand), wrapped the journals' total past 2^63: every tenant's writes refused (attack29 F4).
if KEYS[6] then
  local own = redis.call('ZSCORE', KEYS[7], ARGV[7])
  if own and not usable_bytes(own) then return redis.error_reply('${NOTHING_WRITTEN} ' .. KEYS[7] .. ' scores ' .. ARGV[7] .. ' with no byte count (an integer from 0 to 2^40)') end
end
local limit = tonumber(ARGV[3])
local ttl = tonumber(ARGV[5])
${NOW}
if ARGV[10] and now >= tonumber(ARGV[10]) then return 0 end
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('HSET', KEYS[4], 'used', string.format('%d', now))
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[4], ttl)
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
end
if limit == 0 then return 0 end
local id = tonumber(redis.call('HGET', KEYS[3], 'seq') or '0') + 1
local entry = '{"id":' .. string.format('%d', id) .. ARGV[1]
local size = math.max(tonumber(ARGV[2]), #entry)
local budget = tonumber(ARGV[4])
local n = redis.call('LLEN', KEYS[2]) + 1
local bytes = tonumber(redis.call('HGET', KEYS[3], 'bytes') or '0') + size
local old = 0
local others = 0
local room = math.huge
local share = math.huge
local floor = 0
if KEYS[6] then
  room = tonumber(ARGV[6])
  floor = tonumber(ARGV[8])
  local held = redis.call('ZSCORE', KEYS[7], ARGV[7])
  local slots = redis.call('ZCARD', KEYS[7])
  if not held then
    if (slots + 1) * floor > room then
      local idle = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', '(' .. string.format('%d', now - ${FLOOR_IDLE_MS}), 'LIMIT', 0, ${FLOOR_LAPSES_PER_WRITE})
      for _, other in ipairs(idle) do
        if (slots + 1) * floor <= room then break end
        redis.call('ZREM', KEYS[8], other)
        local weight = redis.call('ZSCORE', KEYS[7], other)
        -- Another's weight of no use is left alone (its slot kept): given back, it would wrap the total.
        if weight and usable_bytes(weight) and other ~= ARGV[7] then
          redis.call('ZREM', KEYS[7], other)
          redis.call('DEL', ${otherKey(9, 'other', 'journal')}, ${otherKey(9, 'other', 'jsizes')})
          if redis.call('EXISTS', ${otherKey(9, 'other', 'jmeta')}) == 1 then redis.pcall('HSET', ${otherKey(9, 'other', 'jmeta')}, 'bytes', '0') end
          redis.call('HINCRBY', KEYS[6], '!journals', string.format('%d', -tonumber(weight)))
          slots = slots - 1
        end
      end
      if (slots + 1) * floor > room then return 0 end
    end
    slots = slots + 1
  end
  old = tonumber(held or '0')
  others = tonumber(redis.call('HGET', KEYS[6], '!journals') or '0') - old
  share = math.max(floor, math.floor(room / slots))
end
local drop = 0
while n - drop > 1 and (n - drop > limit or bytes > budget or (others + bytes > room and bytes > share)) do
  bytes = bytes - tonumber(redis.call('LINDEX', KEYS[2], drop))
  drop = drop + 1
end
if others + bytes > room then
  if bytes > share then return 0 end
  local need = others + bytes - room
  while need > 0 do
    local top = redis.call('ZREVRANGEBYSCORE', KEYS[7], '+inf', '(' .. string.format('%d', floor), 'WITHSCORES', 'LIMIT', 0, 2)
    local u, weight = top[1], top[2]
    if u == ARGV[7] then u, weight = top[3], top[4] end
    if not u then break end
    weight = tonumber(weight)
    -- Another tenant's keys of the wrong type (written by hand) are that tenant's: its weight is
    -- let go whole, and this journal goes on (attack24 R5-3: every other tenant's journal stopped).
    local oldest = redis.pcall('LPOP', ${otherKey(9, 'u', 'jsizes')})
    local gone = weight
    if type(oldest) == 'string' then
      redis.pcall('LPOP', ${otherKey(9, 'u', 'journal')})
      gone = math.min(weight, tonumber(oldest) or weight)
      if redis.call('EXISTS', ${otherKey(9, 'u', 'jmeta')}) == 1 then redis.pcall('HSET', ${otherKey(9, 'u', 'jmeta')}, 'bytes', string.format('%d', weight - gone)) end
    end
    redis.call('ZADD', KEYS[7], string.format('%d', weight - gone), u)
    others = others - gone
    need = need - gone
  end
  if need > 0 then
    redis.call('HSET', KEYS[6], '!journals', string.format('%d', others + old))
    return 0
  end
end
redis.call('HSET', KEYS[3], 'seq', string.format('%d', id))
redis.call('HSET', KEYS[3], 'bytes', string.format('%d', bytes))
redis.call('RPUSH', KEYS[1], entry)
redis.call('RPUSH', KEYS[2], string.format('%d', size))
if drop > 0 then
  redis.call('LTRIM', KEYS[1], drop, -1)
  redis.call('LTRIM', KEYS[2], drop, -1)
end
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
if KEYS[6] then
  redis.call('HSET', KEYS[6], '!journals', string.format('%d', others + bytes))
  redis.call('ZADD', KEYS[7], string.format('%d', bytes), ARGV[7])
  redis.call('ZADD', KEYS[8], string.format('%d', now), ARGV[7])
end
return id
`)

/**
 * Lua: gives back the slot of tenant ARGV[`arg`] in the journal weights `weights`, and what its
 * journal counts in the usage hash `usage` (`!journals`), leaving the bytes in a local `held`.
 */
export const releaseJournal = (usage: string, weights: string, arg: number) => `local held = count_of(redis.call('ZSCORE', ${weights}, ARGV[${arg}]))
  redis.call('ZREM', ${weights}, ARGV[${arg}])
  if held > 0 then redis.call('HINCRBY', ${usage}, '!journals', string.format('%d', -held)) end`

/**
 * Empties the journal; the id sequence goes on. KEYS: journal, jsizes, jmeta, ops, opt (the
 * outcome record the tenant's writes use), then with a store budget the usage hash and the journal weights.
 * ARGV: the tenant's id, the operation id, how long to keep its outcome on record (ms), the most
 * entries that record keeps. (KEYS[8],
 * the journals' last entries, is not read.) The tenant
 * keeps its slot, weighing 0 (so a partner that clears its journal records again whatever other
 * keys hold). Recorded, so that a clear whose reply was lost is settled (`redis-outcomes.ts`).
 */
const CLEAR = redisScript(`
${typesBeforeWriting([
  ['KEYS[3]', 'hash'],
  ['KEYS[4]', 'hash', ['!seq']],
  ['KEYS[5]', 'zset'],
  ['KEYS[6]', 'hash', ['!total', '!claimed', '!journals']],
  ['KEYS[7]', 'zset'],
])}
${replayOutcome('KEYS[4]', 2, 3)}
redis.call('DEL', KEYS[1], KEYS[2])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('HSET', KEYS[3], 'bytes', '0') end
if KEYS[6] then
  local held = redis.call('ZSCORE', KEYS[7], ARGV[1])
  if held then
    redis.call('ZADD', KEYS[7], 0, ARGV[1])
    redis.call('HINCRBY', KEYS[6], '!journals', string.format('%d', -count_of(held)))
  end
end
${NOW}
${recordOutcome('KEYS[4]', 'KEYS[5]', 2, 3, 4, "'1'")}
return '1'
`)

/** What one command of a journal read returns at most, in bytes of entries (by their weights in `jsizes`, never less than their JSON), or one entry when it alone weighs more: as a list's page (`LIST_PAGE_BYTES` in `redis-storage.ts`, attack7 K2). */
export const JOURNAL_PAGE_BYTES = 256 * 1024
/** The most entries one page of a journal read weighs (`jsizes`) before it stops. */
const JOURNAL_PAGE_ENTRIES = 256

/**
 * One page of a journal, read newest first. KEYS: journal, jsizes. ARGV[1]: the id of the newest
 * entry wanted (-1: the newest there is). Returns the entries up to that id, oldest first, as
 * many as {@link JOURNAL_PAGE_BYTES} holds by their weights (at least one), and 1 when the page
 * begins with the journal's oldest entry (0 otherwise); no entries when that id is gone (dropped
 * as the oldest, or cleared).
 * @note Entries are never changed once written, and their ids follow each other (each recorded
 * entry takes the next): so the index of an id is its distance from the oldest entry's id, read
 * in the same script, however many entries were dropped or added between pages.
 */
const JOURNAL_PAGE = redisScript(`
local n = redis.call('LLEN', KEYS[1])
if n == 0 then return {{}, 1} end
local oldest = tonumber(string.match(redis.call('LINDEX', KEYS[1], 0), '^{"id":(%d+)'))
local last = n - 1
if ARGV[1] ~= '-1' then last = tonumber(ARGV[1]) - oldest end
if last < 0 then return {{}, 1} end
if last > n - 1 then last = n - 1 end
local sizes = redis.call('LRANGE', KEYS[2], math.max(0, last - ${JOURNAL_PAGE_ENTRIES - 1}), last)
local first, bytes = last, 0
for i = #sizes, 1, -1 do
  bytes = bytes + tonumber(sizes[i])
  if bytes > ${JOURNAL_PAGE_BYTES} and i < #sizes then break end
  first = last - (#sizes - i)
end
return {redis.call('LRANGE', KEYS[1], first, last), first == 0 and 1 or 0}
`)

/**
 * The keys a tenant's journal touches (`RedisStorage.keys` names them): its own three, the
 * tenant's `meta` and `categories` (what the store budget counts of it), and the outcome record.
 */
export interface JournalKeys extends OutcomeKeys {
  readonly journal: string
  readonly journalSizes: string
  readonly journalMeta: string
  readonly meta: string
  readonly categories: string
}

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
  /** With {@link usage}: the sorted set of every tenant's journal weight (the tenants holding a slot). */
  readonly weights?: string | undefined
  /** With {@link usage}: the sorted set of when each slot's journal last recorded (a slot idle past `FLOOR_IDLE_MS` can be taken). */
  readonly uses?: string | undefined
  /** With {@link usage}: the prefix of every key, to name other tenants' journals when room is made in theirs. */
  readonly prefix?: string | undefined
  /** The tenant's id, its field in {@link usage}. */
  readonly tenant?: string | undefined
  /** What all journals together may weigh (bytes), with {@link usage}: the store budget. */
  readonly storeBudget?: number | undefined
}

export class RedisJournal implements TenantJournal {
  readonly #link: RedisLink
  readonly #keys: readonly string[]
  /** The store budget, the tenant's id, the floor and the key prefix, for the usage hash and the weights (the last of {@link #keys}). */
  readonly #usageArgs: readonly (string | number)[]
  /** The usage hash and the journal weights, with a store budget. */
  readonly #usageKeys: readonly string[]
  /** The outcome record the tenant's writes use, for clears (`redis-outcomes.ts`). */
  readonly #outcomes: OutcomeKeys
  readonly #limit: number
  readonly #budget: number
  readonly #ttlMs: number
  /** Nothing held on this process's heap: the entries are in Redis. */
  readonly bytes = 0

  constructor(link: RedisLink, keys: JournalKeys, options: RedisJournalOptions = {}) {
    this.#link = link
    this.#usageKeys = options.usage === undefined ? [] : [options.usage, options.weights ?? `${options.usage}:jweights`, options.uses ?? `${options.usage}:jused`]
    this.#keys = [keys.journal, keys.journalSizes, keys.journalMeta, keys.meta, keys.categories, ...this.#usageKeys]
    this.#usageArgs = [options.storeBudget ?? -1, options.tenant ?? '', tenantFloorBytes(options.storeBudget ?? Number.POSITIVE_INFINITY), options.prefix ?? '']
    this.#outcomes = keys
    this.#limit = options.limit ?? DEFAULT_JOURNAL_LIMIT
    this.#budget = options.bytes ?? DEFAULT_JOURNAL_BYTES
    this.#ttlMs = options.ttlMs ?? 0
  }

  /**
   * Stores the entry, formatted now, weighed as the in-memory journal weighs it ({@link journalWeight}),
   * so that both keep the same entries under the same budget (unless its JSON, as Redis holds
   * it, is heavier: then that is counted, see {@link RECORD}); settles once Redis has it. `grow`
   * is for the server's heap budget, which entries kept in Redis do not touch.
   */
  async record(input: JournalInput): Promise<void> {
    const entry = input instanceof JournalDraft ? input.fields() : input
    const rest = `,${JSON.stringify(entry).slice(1)}`
    const size = journalWeight(input)
    // @note Its deadline: when the request stops waiting for it, as Redis's time at or before the
    // true one. Reaching Redis later (a stalled connection delivered), it is dropped, never listed
    // after a journal clear answered in the meantime (attack9 R2).
    const until = Math.min(this.#link.requestDeadline() ?? Number.POSITIVE_INFINITY, monotonicNow() + this.#link.commandTimeoutMs)
    const due = Math.floor(await this.#link.redisNow(until, this.#keys[0]))
    await this.#link.script(RECORD, this.#keys, [rest, Math.max(0, Math.round(size)), this.#limit, this.#budget, this.#ttlMs, ...this.#usageArgs, due])
  }

  /**
   * The entries, oldest first, read in pages of about {@link JOURNAL_PAGE_BYTES} from the newest
   * back, one command each, so that other commands of every replica run between them (attack7 K2).
   * @note The entries up to the newest when the read began, back to the oldest still there when
   * the last page is read: entries dropped as the oldest while it reads (or cleared, or the
   * tenant deleted) are left out, never an entry twice or one in between, nor one of another journal.
   */
  async all(filter: JournalFilter = {}): Promise<JournalEntry[]> {
    const pages: JournalEntry[][] = []
    let newest = -1
    for (;;) {
      const [texts, oldest] = (await this.#link.script(JOURNAL_PAGE, this.#keys.slice(0, 2), [newest])) as [string[], number]
      const page = texts.map((text) => JSON.parse(text) as JournalEntry)
      // @note Not the entry asked for: the journal was deleted since the last page (its ids start
      // again at 1) and the page is of the new one. What was read is the old one's newest part, as
      // if its older entries had been cleared; before, both were answered as one (attack9 R3).
      if (newest !== -1 && page.at(-1)?.id !== newest) break
      if (page.length > 0) pages.push(page)
      if (oldest === 1 || page.length === 0) break
      newest = page[0]!.id - 1
    }
    return pages.reverse().flat().filter((entry) => journalMatches(entry, filter))
  }

  async clear(): Promise<void> {
    const keys = [...this.#keys.slice(0, 3), this.#outcomes.outcomes, this.#outcomes.outcomeTimes, ...this.#usageKeys]
    await recordedWrite(this.#link, this.#outcomes, `the journal clear of tenant ${this.#usageArgs[1]}`, CLEAR, keys, (op, keepMs, entries) => [this.#usageArgs[1]!, op, keepMs, entries])
  }

  async count(): Promise<number> {
    return (await this.#link.call(this.#keys[0], ['LLEN', this.#keys[0]!])) as number
  }
}
