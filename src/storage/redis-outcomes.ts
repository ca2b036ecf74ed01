/**
 * Writes to Redis whose outcome is learnt even when their reply is lost: each such write carries
 * an operation id, which its script records (with its result) in the tenant's `ops` hash and `opt`
 * sorted set; a write sent and never answered (a timeout, a connection dropped after sending) is
 * then settled by asking Redis about that id (docs/decisions/0005-redis-replicas.md, issue 20 F03).
 * Creates, scenario switches and resets, journal clears and planned-answer writes all go this way,
 * so an answer states the write's true outcome: applied, not applied (and now never), or unknown.
 * Each such write also carries the Redis time it was sent at (in its operation id) and refuses,
 * never applied, once its `void` may no longer be on record (attack7 K1): so a write not applied
 * within {@link OUTCOME_RECORD_MS} of being sent never is. And it carries the Redis time by which
 * its request is answered (its deadline), and refuses once that has come (attack7 K1,
 * `write_outcome_unknown`): so a write not applied by the time its answer is sent never is, and
 * every answer, `write_outcome_unknown` included, is final.
 */
import { randomBytes } from 'node:crypto'
import { monotonicNow } from '../core/clock.js'
import { StorageUnavailableError, WriteOutcomeUnknownError } from './storage.js'
import { NOTHING_WRITTEN, NOW, RedisOutcomeUnknown, RedisScriptRefusal, redisScript, type RedisLink, type RedisScript } from './redis-connection.js'
import { USABLE_COUNT } from './redis-counts.js'

/**
 * How long a write's outcome stays on record under its operation id (`ops`, `opt`), at least:
 * longer than a request waits for Redis, so that a request whose write went unanswered can ask.
 * A recorded write that reaches Redis this long after it was sent is refused (never applied).
 */
export const OUTCOME_RECORD_MS = 120_000
/**
 * How long a record of write outcomes with no write at all lives (its keys' TTL, ms): its entries
 * go by their age and the cap meanwhile.
 * @note It was {@link OUTCOME_RECORD_MS}: a clock jumping forward past it and back expired the whole
 * record at once, unmarked, a `void` still awaited with it (attack15 U1). An hour: a tenant that
 * stops writing on a Redis Cluster holds its own record (up to about 200 KB) that long.
 */
export const OUTCOME_RECORD_IDLE_MS = 60 * 60 * 1000
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
  /** How long the record keeps each entry (ms), at least: {@link OUTCOME_RECORD_MS}. */
  readonly outcomeMs: number
}

/**
 * Lua: refuses the script before it writes anything when one of `keys` (Lua expressions, each a
 * key or nil) holds another type of value than the one given with it (`integer`: a string holding
 * one, as INCRBY needs), or a hash whose `integerFields` hold something else than an integer
 * ({@link usableCount}: HINCRBY and the scripts' sums need them; written by hand, or by another program using the prefix): `WRONGTYPE
 * nothing written: <key> holds a <type>, not a <type>`, read as a key of the wrong type with
 * nothing applied ({@link NOTHING_WRITTEN}).
 * @note Redis rolls nothing back: a take of a planned answer stopped by the plan book's count of
 * the wrong type had used the plan up, and was answered 503 storage_unavailable (attack26 F1).
 */
export type KeyType = readonly [key: string, type: 'hash' | 'zset' | 'list' | 'string' | 'integer', integerFields?: readonly string[]]

/** How a key of {@link KeyType} is named when it holds something else: `not a <this>`. */
export function keyTypeName([, type, fields = []]: KeyType): string {
  return type === 'integer' ? 'string holding an integer' : type === 'hash' && fields.length > 0 ? 'hash of integer counts' : type
}

export const typesBeforeWriting = (keys: readonly KeyType[]) => `${USABLE_COUNT}
for _, typed in ipairs({ ${keys
  .map(([key, type, fields = []]) => `{ ${key}, '${type}', { ${fields.map((field) => `'${field}'`).join(', ')} } }`)
  .join(', ')} }) do
  if typed[1] then
    local held = redis.call('TYPE', typed[1]).ok
    local want = typed[2]
    if want == 'integer' then
      want = 'string holding an integer'
      if held == 'string' then held = usable_count(redis.call('GET', typed[1])) and want or 'string holding no integer' end
    end
    if held ~= 'none' and held ~= want then return redis.error_reply('${NOTHING_WRITTEN} ' .. typed[1] .. ' holds a ' .. held .. ', not a ' .. want) end
    if held == 'hash' then
      for _, field in ipairs(typed[3]) do
        local value = redis.call('HGET', typed[1], field)
        if value and not usable_count(value) then return redis.error_reply('${NOTHING_WRITTEN} ' .. typed[1] .. ' field ' .. field .. ' holds no integer') end
      end
    end
  end
end`

/**
 * Lua: records the outcome `value` (a result, or `void`: never to be applied) of operation
 * ARGV[`op`] in `ops` and `opt` for ARGV[`keep`] ms and at most ARGV[`cap`] entries (the record's
 * {@link OutcomeKeys.outcomeEntries}). `opt` orders the entries as they were recorded (its scores
 * are `!seq` in `ops`, counted up): entries sent `keep` ms ago or more (by the time in their id)
 * go, and past the cap the oldest ones, but a `void` whose operation's deadline has not come by
 * Redis's time now (it may still arrive, and must then refuse). `!trimmed` in `ops` is the newest
 * send time of an entry that went, `!ahead` of one sent later than now. Needs `now` ({@link NOW}).
 * @note Entries that went by their age were not marked: a clock stepped forward past `keep` and
 * back dropped a `void` still awaited, and its write, held on the network, was applied after its
 * answer said it never would be (attack15 U1).
 * @note Scored by Redis's time, the record's order broke when that time went back (a clock
 * stepped, a tenant moved to a master whose clock is behind): every new entry sorted below the
 * old ones, so each write trimmed its own entry (and a settle its own `void`, at once: a create
 * answered 503 was applied seconds later, attack13 T5), and the mark then refused most writes
 * for as long as the step (attack13 T1, T2).
 */
export const recordOutcome = (ops: string, opt: string, op: number, keep: number, cap: number, value: string, born = 'now') => `local keep = tonumber(ARGV[${keep}])
redis.call('HSET', ${ops}, ARGV[${op}], ${value})
local seq = redis.call('HINCRBY', ${ops}, '!seq', 1)
if seq == 1 then
  -- A record an earlier version scored by time: the count goes on from its newest score.
  local top = redis.call('ZRANGE', ${opt}, -1, -1, 'WITHSCORES')
  if top[2] ~= nil then
    seq = math.floor(tonumber(top[2])) + 1
    redis.call('HSET', ${ops}, '!seq', string.format('%d', seq))
  end
end
-- When this record began (Redis's time), kept as long as it lives: a write sent before it may have been recorded in one
-- deleted since (see SETTLE). Also for a record an earlier version began.
if seq == 1 or redis.call('HEXISTS', ${ops}, '!born') == 0 then redis.call('HSET', ${ops}, '!born', string.format('%d', ${born})) end
redis.call('ZADD', ${opt}, seq, ARGV[${op}])
-- Entries the order no longer lists (another program deleted \`opt\` alone): listed again as the oldest, so that their age
-- and the cap trim them. Unlisted, they stayed for good, the record past its cap while writes went on (attack72 F2:
-- 42,608 entries of 16,384).
if redis.call('HLEN', ${ops}) > redis.call('ZCARD', ${opt}) + 16 then
  for _, field in ipairs(redis.call('HKEYS', ${ops})) do
    if string.sub(field, 1, 1) ~= '!' and not redis.call('ZSCORE', ${opt}, field) then redis.call('ZADD', ${opt}, 0, field) end
  end
end
local over = redis.call('ZCARD', ${opt}) - tonumber(ARGV[${cap}])
local gone = {}
local marks = {}
local kept = nil
local function trim(id)
  table.insert(gone, id)
  over = over - 1
  local sent = tonumber(string.match(id, '^(%d+):') or '')
  if sent == nil then return end
  local mark = sent > now and '!ahead' or '!trimmed'
  marks[mark] = math.max(marks[mark] or 0, sent)
end
for _, id in ipairs(redis.call('ZRANGE', ${opt}, 0, 15)) do
  local sent = tonumber(string.match(id, '^(%d+):') or '')
  if sent ~= nil and now - sent >= keep then
    -- Marked too: late by its age now, but not once the clock goes back (attack15 U1).
    trim(id)
  elseif over > 0 then
    local due = tonumber(string.match(id, '^%d+:(%d+):') or '')
    local outcome = due ~= nil and due > now and redis.call('HGET', ${ops}, id)
    if outcome == 'void' or outcome == 'gone' then kept = kept or id else trim(id) end
  end
end
-- Every one of the oldest a void still awaited: the oldest goes all the same, marked.
if over > 0 and kept ~= nil then trim(kept) end
for mark, sent in pairs(marks) do
  if sent > tonumber(redis.call('HGET', ${ops}, mark) or '0') then redis.call('HSET', ${ops}, mark, string.format('%d', sent)) end
end
if #gone > 0 then
  redis.call('HDEL', ${ops}, unpack(gone))
  redis.call('ZREM', ${opt}, unpack(gone))
end
redis.call('PEXPIRE', ${ops}, math.max(keep, ${OUTCOME_RECORD_IDLE_MS}))
redis.call('PEXPIRE', ${opt}, math.max(keep, ${OUTCOME_RECORD_IDLE_MS}))`

/**
 * Lua: sets `late` when operation ARGV[`op`], sent at the Redis time its id carries
 * ({@link operationId}), may have had its outcome forgotten by the record `ops` by now: it was
 * sent ARGV[`keep`] ms ago or more (the record keeps each entry that long, at least), or the
 * record trimmed, by its cap, an entry sent at or after that time (`!trimmed`; for a write whose
 * send time is later than Redis's time now, sent before its clock went back, `!ahead`: the newest
 * such entry trimmed). With
 * `answered`, also when its request has been answered by now: its id's deadline has come, or when
 * it was sent later than Redis's time now (timed by another clock: a master its tenant left, or
 * this one before it stepped back; the replica times it anew and sends it again, once). Each
 * stays true from then on. An id without a time (an older version's) is never late, one without
 * a deadline never answered.
 * @note Redis's own clock (`TIME`), as the record's; an estimated send time or deadline at or
 * before the true one only makes a write late sooner (attack7 K1). A mark later than Redis's time
 * now says its clock stepped back: the mark becomes now (writes sent before now stay late, those
 * sent after are not), where before every write sent after the step was refused until the record
 * expired, two minutes after its last applied write (attack9 R1); the mark it was goes to
 * `!ahead`. Entries sent before the step, trimmed after it, mark `!ahead` too: they say nothing of
 * writes sent since, which they once refused for as long as the step (attack13 T1).
 */
const lateOutcome = (ops: string, op: number, keep: number, answered = false) => `local late = false
local sent = tonumber(string.match(ARGV[${op}], '^(%d+):') or '')
if sent then
  local at = redis.call('TIME')
  local ms = tonumber(at[1]) * 1000 + math.floor(tonumber(at[2]) / 1000)
  local trimmed = tonumber(redis.call('HGET', ${ops}, '!trimmed') or '')
  if trimmed ~= nil and trimmed > ms then
    if trimmed > tonumber(redis.call('HGET', ${ops}, '!ahead') or '0') then redis.call('HSET', ${ops}, '!ahead', string.format('%d', trimmed)) end
    trimmed = ms
    redis.call('HSET', ${ops}, '!trimmed', string.format('%d', ms))
  end
  late = ms - sent >= tonumber(ARGV[${keep}]) or (trimmed ~= nil and trimmed >= sent)
  if not late and sent > ms then
    local ahead = tonumber(redis.call('HGET', ${ops}, '!ahead') or '')
    late = ahead ~= nil and ahead >= sent
  end${answered ? `
  local due = tonumber(string.match(ARGV[${op}], '^%d+:(%d+):') or '')
  if due ~= nil and ms >= due then late = true end
  if sent > ms then late = true end` : ''}
end`

/**
 * Lua, a recorded write's first lines: when operation ARGV[`op`] already ran, its recorded result
 * again (it is never applied twice); VOID when it was declared never applied ({@link SETTLE});
 * LATE when that `void` may be gone from the record by now ({@link lateOutcome}: ARGV[`keep`] is
 * how long the record keeps an entry), so that a write reaching Redis from an abandoned
 * connection minutes on, or after a flood of other writes, is never applied (attack7 K1); LATE
 * too once its request has been answered (its id's deadline), so that no answer is overtaken.
 */
export const replayOutcome = (ops: string, op: number, keep: number) => `local done = redis.call('HGET', ${ops}, ARGV[${op}])
if done == 'void' or done == 'gone' then return redis.error_reply('VOID') end
if done then return done end
do
  ${lateOutcome(ops, op, keep, true).replaceAll('\n', '\n  ')}
  if late then return redis.error_reply('LATE') end
end`

/**
 * Settles a write that got no answer. KEYS: ops, opt. ARGV: the operation id; how long to keep
 * the outcome on record (ms); the most entries the record keeps. Returns the write's recorded
 * result; or `void` when it was not applied, and records that it never will be (the write, should
 * it still arrive, refuses with VOID); or `unknown` when its record may be gone (sent as long ago
 * as the record keeps, or an entry as new trimmed by the cap): it may have been applied, and
 * should it still arrive, it refuses with LATE, so it is applied by now or never; or `gone` when the record held nothing
 * (no `!seq`) though ARGV[4] is `1` (this process recorded an outcome in it lately: deleted by another program since),
 * or was begun (`!born`, Redis's time) after the write was sent, or when is not known: voided as for `void`, but whether
 * it was applied before the record went cannot be told.
 * @note Told by `!seq` alone, a record deleted, then begun again by another write before the settle (any tenant's, on a
 * Redis where all share one record) was taken for one that never held the write: `void`, 503 storage_unavailable for
 * creates Redis applied (attack69 F1: 11 of 62).
 * @note A record begun between a write's sending and its arrival makes its settle say `gone` too (the first write in
 * an hour's quiet, sent as another began the record): unknown, where `void` was true; never the other way.
 * ARGV[5], the operation of this process's last write answered before this one was sent: still on record, it says
 * the record was there before the write was sent, which the send time's estimate (early by the clock reading's
 * delay) may not: a create sent just after the record began was answered unknown (a fresh-clone CI of stop 48).
 * ARGV[6], this link's id ({@link linkId}): a record its own settle began is taken as old as the writes it may ask about.
 * @note Taken for `void`, a create Redis applied whose reply was lost, its record deleted by a cleanup job in between,
 * was answered 503 storage_unavailable, "not applied", and the retry it invites stored it twice (attack66 F2).
 * @note Not by the deadline: once it has come, the write is refused should it still arrive, so
 * no record means not applied, as before it.
 */
const SETTLE = redisScript(`
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then return done end
${lateOutcome('KEYS[1]', 1, 2)}
if late then return 'unknown' end
local emptied
if redis.call('HEXISTS', KEYS[1], '!seq') == 0 then
  emptied = ARGV[4] == '1'
else
  -- A record begun after the write was sent (or of unknown age): one it may have been recorded in was deleted since.
  local born = tonumber(redis.call('HGET', KEYS[1], '!born') or '')
  -- Begun by a settle of this process's own (ARGV[6]): as old as the writes it may ask about (see below).
  if born ~= nil and ARGV[6] ~= '' and redis.call('HGET', KEYS[1], '!bornBy') == ARGV[6] then born = born - tonumber(ARGV[2]) end
  emptied = born == nil or (sent ~= nil and born > sent)
  -- A write this process had answered before this one was sent, still on record: the record was there then (the send
  -- time is estimated at or before the true one, and may come out before a record begun just earlier).
  if emptied and ARGV[5] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[5]) == 1 then emptied = false end
end
${NOW}
-- Recorded as what it says (a settle asked again after its reply was lost reads it: review52 F1), never applied.
${recordOutcome('KEYS[1]', 'KEYS[2]', 1, 2, 3, "emptied and 'gone' or 'void'")}
-- A record this settle begins, not emptied: as old as the writes it may be asked about (those sent longer ago are late)
-- for this process's settles, so that the other writes of the same outage lost on the way are still told "not applied"
-- (review53 R5: every settle after the first answered unknown, blaming another program). For this process's only: dated
-- back for all, another replica's create applied and recorded in a record deleted since, its reply lost, was answered
-- "not applied" by that date (attack75 F1: 12 of 12).
if seq == 1 and not emptied and ARGV[6] ~= '' then redis.call('HSET', KEYS[1], '!bornBy', ARGV[6]) end
-- (Named apart from recordOutcome's own locals.)
if emptied then return 'gone' end
return 'void'
`)

/** Each link's id, drawn at random: a record of outcomes its settle began names it (SETTLE's ARGV[6], `!bornBy`). */
const linkIds = new WeakMap<RedisLink, string>()

/** `link`'s id (see {@link linkIds}). */
function linkId(link: RedisLink): string {
  let id = linkIds.get(link)
  if (id === undefined) linkIds.set(link, (id = randomBytes(12).toString('base64url')))
  return id
}

/** When (monotonic ms) each link last had a write recorded in each record of outcomes, and its operation (see {@link recordedLately}). */
const lastRecorded = new WeakMap<RedisLink, Map<string, { readonly at: number; readonly op: string }>>()

/** Write `op` recorded its outcome in `outcomes` (a reply came): noted, for {@link recordedLately} and {@link lastRecordedOp}. */
export function noteRecorded(link: RedisLink, outcomes: string, op: string): void {
  let times = lastRecorded.get(link)
  if (times === undefined) lastRecorded.set(link, (times = new Map()))
  times.set(outcomes, { at: monotonicNow(), op })
}

/** The operation of the write this process last had recorded in `outcomes` (its reply came), or '' (see SETTLE's ARGV[5]). */
export function lastRecordedOp(link: RedisLink, outcomes: string): string {
  return lastRecorded.get(link)?.get(outcomes)?.op ?? ''
}

/**
 * Whether this process had a write recorded in `outcomes` within the time the record outlives its last write (less a
 * minute): the record must then hold something, and holding nothing says another program deleted it (see SETTLE).
 */
function recordedLately(link: RedisLink, outcomes: string): boolean {
  const at = lastRecorded.get(link)?.get(outcomes)?.at
  return at !== undefined && monotonicNow() - at < OUTCOME_RECORD_IDLE_MS - 60_000
}

/**
 * A new operation id: the Redis time (ms) the write is sent at, as {@link RedisLink.redisNow}
 * estimates it (at or before the true time), then its deadline when given (the Redis time by
 * which it is answered, at or before the true one: the write refuses from then on), then 96
 * random bits (`1796000000000:1796000009500:…`).
 */
export function operationId(sent: number, deadline?: number): string {
  const due = deadline === undefined ? '' : `${Math.max(0, Math.floor(deadline))}:`
  return `${Math.max(0, Math.floor(sent))}:${due}${randomBytes(12).toString('base64url')}`
}

/** A recorded write about to be sent: its operation id, and when ({@link monotonicNow}) it is answered at the latest, unsettled or not. */
export interface RecordedOperation {
  readonly op: string
  /** When ({@link monotonicNow}) its send time was estimated. */
  readonly made: number
  /** Its settle asks until then, and its answer never comes before it: the moment its deadline stands for. */
  readonly until: number
}

/**
 * The operation id of a write about to be sent ({@link operationId}): its deadline is the moment
 * its request's Redis work ends (the answer comes after it), or, outside a request, the command
 * timeout and the {@link SETTLE_ROUNDS} a settle takes from now; as Redis's time, estimated at or
 * before the true one ({@link RedisLink.redisNow}: its reading's answer time and the clocks' drift).
 */
export async function newOperation(link: RedisLink, key: string): Promise<RecordedOperation> {
  const made = monotonicNow()
  const sent = await link.redisNow(made, key)
  const until = link.requestDeadline() ?? monotonicNow() + link.commandTimeoutMs * (1 + SETTLE_ROUNDS)
  return { op: operationId(sent, await link.redisNow(until, key)), until, made }
}

/**
 * Runs a recorded write (a script that starts with {@link replayOutcome} and ends with
 * {@link recordOutcome}, given the operation id, the record's time and its most entries by `args`) and returns its
 * result, applied. `what` names it in messages ("the reset of tenant x").
 * @throws StorageUnavailableError when it was not applied (and now never will be);
 * WriteOutcomeUnknownError when Redis could not tell in time; a RedisScriptRefusal of its own.
 */
export async function recordedWrite(
  link: RedisLink,
  keys: OutcomeKeys,
  what: string,
  script: RedisScript,
  scriptKeys: readonly string[],
  args: (op: string, keepMs: number, entries: number) => readonly (string | number)[],
  { confirm = true }: { readonly confirm?: boolean } = {},
): Promise<unknown> {
  for (let attempt = 0; ; attempt++) {
    const operation = await newOperation(link, scriptKeys[0]!)
    const { op, until } = operation
    const known = lastRecordedOp(link, keys.outcomes)
    try {
      const reply = await link.script(script, scriptKeys, args(op, keys.outcomeMs, keys.outcomeEntries), { confirm })
      noteRecorded(link, keys.outcomes, op)
      return reply
    } catch (error) {
      if (error instanceof RedisScriptRefusal && error.message === 'VOID') throw new StorageUnavailableError(`Redis: ${what} (operation ${op}) was declared not applied`)
      if (error instanceof RedisScriptRefusal && error.message === 'LATE') {
        if (attempt === 0 && (await timedByAnotherClock(link, scriptKeys[0]!, operation))) continue
        throw lateWrite(what, op)
      }
      if (!(error instanceof RedisOutcomeUnknown)) throw error
      return settleOutcome(link, keys, op, error, what, until, known)
    }
  }
}

/**
 * Whether write `op`, refused as late, was timed by another clock than its master's now: the
 * master its tenant left (a reshard, a failover: attack13 T3, T4), or this one before its clock
 * stepped back (attack9 R4). Such a write was never applied; it is sent again once, timed anew.
 * Reads the master's clock again (a round trip) unless the slot is known to have moved.
 */
export async function timedByAnotherClock(link: RedisLink, key: string, operation: RecordedOperation): Promise<boolean> {
  if (link.clockMoved(key)) return true
  const sent = Number(/^(\d+):/.exec(operation.op)?.[1] ?? Number.NaN)
  if (!Number.isFinite(sent)) return false
  const now = await link.readClockAgain(key)
  // Where Redis's clock would be had it run as the reading that timed the write said: a clock that
  // jumped (forward too: attack15 N1, a second or two of writes refused late) is not there.
  return sent > now || Math.abs(now - (sent + monotonicNow() - operation.made)) > CLOCK_JUMP_MS
}

/** A clock found this far (ms) from where the reading that timed a write put it has jumped: {@link timedByAnotherClock}. */
const CLOCK_JUMP_MS = 1000

/**
 * Finds out what became of write `op`, sent and never answered, by `until` (its
 * {@link RecordedOperation.until}; by default within the request's time, or {@link SETTLE_ROUNDS}
 * command timeouts outside a request): asks Redis, again while it does not answer. Its recorded
 * result (applied), or a {@link StorageUnavailableError} when it was not applied (and now never
 * will be: {@link SETTLE} voids it), or a {@link WriteOutcomeUnknownError} when Redis could not
 * tell in time, never before `until`: the write refuses from then on, so that answer is final too.
 * @note On the same connection, Redis answers commands in order: an answer to the question
 * means the write was run, or never will be, before it (issue 20 F03).
 */
export async function settleOutcome(link: RedisLink, keys: OutcomeKeys, op: string, failure: StorageUnavailableError, what: string, until = monotonicNow() + (link.requestTimeLeft() ?? link.commandTimeoutMs * SETTLE_ROUNDS), known = ''): Promise<string> {
  let last: unknown = failure
  // Closed (the sandbox closing): nothing can be asked any more.
  while (monotonicNow() < until && link.requestTimeLeft() !== 0 && !link.closed) {
    let reply: string
    try {
      reply = String(await link.script(SETTLE, [keys.outcomes, keys.outcomeTimes], [op, keys.outcomeMs, keys.outcomeEntries, recordedLately(link, keys.outcomes) ? '1' : '0', known, linkId(link)]))
    } catch (error) {
      if (!(error instanceof StorageUnavailableError)) throw error
      last = error
      // A question never answered has taken its time already; one refused at once waits a little.
      if (!(error instanceof RedisOutcomeUnknown)) await new Promise((resolve) => setTimeout(resolve, SETTLE_PAUSE_MS))
      continue
    }
    if (reply === 'void') throw new StorageUnavailableError(`${failure.message} (${what} was not applied)`, { cause: failure })
    if (reply === 'unknown') break
    if (reply === 'gone') throw new WriteOutcomeUnknownError(`${failure.message}; whether ${what} was applied is unknown: the record of write outcomes (${keys.outcomes}) was emptied or begun again since it was sent (deleted by another program?)`, { cause: failure })
    // @note Applied on the master, its reply lost: whether a replica has it cannot be asked (Redis's
    // WAIT counts the writes of its own connection, and this one may be another), so where the
    // master has replicas the answer says unknown rather than applied (attack15 F1).
    if (await link.waitsForReplica(keys.outcomes)) throw new WriteOutcomeUnknownError(`${failure.message}; ${what} was applied on the master, and whether a replica has it is unknown`, { cause: failure })
    return reply
  }
  // @note Not before its deadline's moment (the last ms of a request's time): it may land until then.
  // A sandbox closing does not wait for it to exit (its process may end first: nobody is answered then).
  const early = until - monotonicNow()
  if (early > 0) await new Promise((resolve) => setTimeout(resolve, early).unref())
  throw new WriteOutcomeUnknownError(`${failure.message}; whether ${what} was applied is unknown`, { cause: last })
}

/**
 * The failure of a recorded write Redis refused as LATE ({@link replayOutcome}): not applied, and
 * never will be (a copy of it arriving later is later still).
 */
export function lateWrite(what: string, op: string): StorageUnavailableError {
  return new StorageUnavailableError(`Redis: ${what} (operation ${op}) reached Redis after its request was answered or its outcome could have left the record, and was refused`)
}
