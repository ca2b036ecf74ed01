/**
 * One connection to Redis or a Redis Cluster for the Redis storage and journal, through
 * node-redis (`redis`, an optional peer dependency loaded only here, only with `--redis-url`).
 * See docs/decisions/0005-redis-replicas.md.
 *
 * Every command goes through {@link RedisLink.call} or {@link RedisLink.script}: one place where
 * a Redis failure (down, unreachable, too slow, cluster slot without a master) becomes a
 * {@link StorageUnavailableError}, so clients get `503 storage_unavailable`.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { createHash, randomBytes } from 'node:crypto'
import type * as Redis from 'redis'
import type { RedisClientOptions } from 'redis'
import { monotonicNow } from '../core/clock.js'
import { StorageUnavailableError, WriteOutcomeUnknownError } from './storage.js'
import { PetstoreError } from '../core/petstore-error.js'
import { USABLE_COUNT, usableBeatText } from './redis-counts.js'
import { dropSelfConnects, SelfConnected } from './self-connect.js'

/** @default 2000 ms: a command not answered by then fails (the request answers 503), never hangs. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 2000
/** @default 5000 ms: how long a server waits at start for Redis to answer before it refuses to start. */
export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 5000

/** Where Redis is, as parsed from `--redis-url`. */
export interface RedisTarget {
  /** `cluster` for `redis-cluster://`, `rediss-cluster://` or a comma-separated list of nodes. */
  readonly mode: 'standalone' | 'cluster'
  /** `redis://` or `rediss://` URLs: the server, or the cluster's seed nodes. */
  readonly urls: readonly string[]
  /** The URL without its password, for messages. */
  readonly display: string
}

/**
 * Reads `--redis-url`: `redis://[user:password@]host:port[/db]`, `rediss://…` (TLS), a cluster as
 * `redis-cluster://[user:password@]host:port,host:port` (`rediss-cluster://` for TLS), or a
 * comma-separated list of `redis://` nodes (a cluster). Throws a {@link PetstoreError} on anything else.
 * @example parseRedisUrl('redis-cluster://127.0.0.1:7000,127.0.0.1:7001').mode // 'cluster'
 */
export function parseRedisUrl(value: string): RedisTarget {
  const bad = (why: string) =>
    new PetstoreError('invalid_option', `Cannot use Redis URL ${JSON.stringify(redact(value))}: ${why}. Expected redis://host:port, rediss://host:port, or redis-cluster://host:port,host:port`)
  const cluster = /^(rediss?)-cluster:\/\/(.*)$/.exec(value)
  if (cluster) {
    const scheme = cluster[1]!
    const rest = cluster[2]!
    const at = rest.lastIndexOf('@')
    const auth = at === -1 ? '' : rest.slice(0, at + 1)
    const hosts = (at === -1 ? rest : rest.slice(at + 1)).split(',').filter((host) => host !== '')
    if (hosts.length === 0) throw bad('no host')
    return { mode: 'cluster', urls: hosts.map((host) => checked(`${scheme}://${auth}${host}`, bad)), display: redact(value) }
  }
  const urls = value.split(',').map((part) => checked(part.trim(), bad))
  return { mode: urls.length > 1 ? 'cluster' : 'standalone', urls, display: redact(value) }
}

function checked(url: string, bad: (why: string) => Error): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw bad('not a URL')
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw bad(`unknown scheme ${parsed.protocol}`)
  if (parsed.hostname === '') throw bad('no host')
  return url
}

/** The TCP port a checked Redis URL names (node-redis's default, 6379, when it names none). */
function portOf(url: string): number {
  return Number(new URL(url).port || 6379)
}

/** The URL with its password replaced, for logs and messages. */
function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@]*@/, '//$1:***@')
}

/** A Lua script, sent by its SHA1 (`EVALSHA`) and by its text once Redis does not know it yet. */
export interface RedisScript {
  readonly source: string
  readonly sha: string
}

/** Defines a script for {@link RedisLink.script}. */
export function redisScript(source: string): RedisScript {
  for (const name of commandsOf(source)) scriptCommands.add(name)
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

/** Every command the sandbox's scripts call (see {@link redisScript}): what health's write probe asks the ACL for. */
const scriptCommands = new Set<string>()

/**
 * The commands a script's source calls (`redis.call('X'`, `redis.pcall('X'`), each once; `INFO` left out (the replica
 * guard's, whose refusal has a way of its own: see {@link guardRefused}).
 */
function commandsOf(source: string): string[] {
  return [...new Set(Array.from(source.matchAll(/redis\.p?call\(\s*'([A-Za-z]+)'/g), (match) => match[1]!.toUpperCase()))].filter((name) => name !== 'INFO')
}

/**
 * Lua: refuses the script, before it runs anything, where the ACL would refuse its user one of the calls in `source` (see
 * {@link callsOf}): each command on the declared keys it names, one without any on the first key: `redis.acl_check_cmd`
 * (Redis 7.0 on; passed over before, and for a command Redis does not know, renamed away: the script meets it as it
 * would have).
 * @note Redis checks a script's commands as it runs them and rolls back nothing: a command refused after the script
 * wrote (`-pexpire`, `-zcard`) left the write applied, answered 503 storage_unavailable, each retry of a create adding
 * one more (review49 F1); told from a first write refused only by the line Redis names, every refused write was
 * write_outcome_unknown.
 */
function aclChecked(source: string, covered: ReadonlySet<string> = new Set()): string {
  const keyed = new Map<string, readonly [string, readonly number[]]>()
  const alone = new Set<string>()
  for (const { command, keys } of callsOf(source)) {
    if (command === 'INFO') continue
    if (keys.length === 0) alone.add(command)
    else keyed.set(`${command} ${keys.join(' ')}`, [command, keys])
  }
  const asked = new Set([...keyed.values()].map(([command]) => command))
  // A command called on no declared key (a computed key, ARGV, none): asked on the first key (`redis.acl_check_cmd` given
  // no key for a command that takes one answers at random: `SET` alone refused, then allowed, on one ACL), unless the
  // watch's checks ask it on the keys it runs on (`covered`).
  // @note Asked on KEYS[1], the beat's INCR (on ARGV keys, the watch's) refused every create of a user allowed it on the
  // beat only, all the sandbox runs it on (`-incr (+incr ~…epoch:beat)`: review51 F1).
  const others = [...alone].filter((command) => !asked.has(command) && !covered.has(command))
  if (keyed.size === 0 && others.length === 0) return ''
  // @note Asked on KEYS[1] alone, a Redis 7 selector allowing a command on some keys only (`-rpush (+rpush ~*:meta)`)
  // passed the check, and a switch was stopped after its DEL: the tenant torn to its default seed (attack63 F1). Asked on
  // its first key only, a command on several (`DEL KEYS[1], KEYS[2]`) passed where a selector allowed it on the first,
  // and a switch was stopped after it charged the budget (review51 F2): every key a call names is asked in one check,
  // as Redis asks one selector for all of them.
  return `for _, call in ipairs({${[...keyed.values()].map(([command, keys]) => `{'${command}', {${keys.join(', ')}}}`).join(', ')}}) do
  local keys = {}
  for _, n in ipairs(call[2]) do if KEYS[n] then keys[#keys + 1] = KEYS[n] end end
  if #keys > 0 then
    local known, allowed = pcall(redis.acl_check_cmd, call[1], unpack(keys))
    if known and not allowed then return redis.error_reply('NOPERM the sandbox\\'s user may not run ' .. call[1] .. ' on ' .. table.concat(keys, ', ') .. ' (its ACL): the script was refused before it ran') end
  end
end
for _, command in ipairs({${others.map((name) => `'${name}'`).join(', ')}}) do
  local known, allowed
  if KEYS[1] then known, allowed = pcall(redis.acl_check_cmd, command, KEYS[1]) else known, allowed = pcall(redis.acl_check_cmd, command) end
  if known and not allowed then return redis.error_reply('NOPERM the sandbox\\'s user may not run ' .. command .. (KEYS[1] and (' on ' .. KEYS[1]) or '') .. ' (its ACL): the script was refused before it ran') end
end
`
}

/**
 * The calls a script's source makes (`redis.call('X', …)`, `redis.pcall('X', …)`): each command with the declared keys
 * (`KEYS[n]`) its arguments begin with, in order (`DEL KEYS[1], KEYS[2]` → 1, 2; `SET KEYS[1], ARGV[1]` → 1;
 * `HMGET prefix .. other` → none). An argument is read up to the comma or parenthesis that closes it, past nested calls
 * and string literals.
 * @example callsOf("redis.call('DEL', KEYS[1], KEYS[2])") // [{ command: 'DEL', keys: [1, 2] }]
 */
export function callsOf(source: string): { command: string; keys: number[] }[] {
  const calls: { command: string; keys: number[] }[] = []
  for (const match of source.matchAll(/redis\.p?call\(\s*'([A-Za-z]+)'/g)) {
    const keys: number[] = []
    let at = match.index + match[0].length
    let leading = true
    // Each argument after the command's name, while they are declared keys.
    while (leading && at < source.length) {
      while (/\s/.test(source[at] ?? '')) at++
      if (source[at] !== ',') break
      const start = at + 1
      let depth = 0
      let quote: string | undefined
      at = start
      for (; at < source.length; at++) {
        const char = source[at]!
        if (quote !== undefined) {
          if (char === '\\') at++
          else if (char === quote) quote = undefined
        } else if (char === "'" || char === '"') quote = char
        else if (char === '(' || char === '{' || char === '[') depth++
        else if (char === ')' || char === '}' || char === ']') {
          if (depth === 0) break
          depth--
        } else if (char === ',' && depth === 0) break
      }
      const key = /^\s*KEYS\[(\d+)\]\s*$/.exec(source.slice(start, at))
      if (key) keys.push(Number(key[1]))
      else leading = false
    }
    calls.push({ command: match[1]!.toUpperCase(), keys })
  }
  return calls
}

/**
 * Lua, first in each script sent to one Redis (not a cluster's node): refuses it, before it reads or writes anything, on
 * a replica (the first `role:` line of its `INFO replication` says `slave`: a replica's announced address, listed after
 * it, may hold that text, even after a line break: attack55 F2, review45 F6), as a read-only replica refuses a write
 * (`READONLY`).
 */
const REPLICA_GUARD = `if string.match(redis.call('INFO', 'replication'), '\\nrole:(%a+)') == 'slave' then return redis.error_reply('READONLY it is a replica now (INFO replication says role:slave): the script was refused before it wrote anything') end
`

/**
 * Lua: refuses the script, before it runs anything, where the ACL would refuse its user a write to one of `keys` (see
 * {@link aclChecked}): the keys that stand behind every write (the epoch's token and beat, and the marks their
 * confirmations write), which no write declares.
 * @note The natural pattern `~petstore-sandbox:*` leaves out `{petstore-sandbox:epoch:beat}:loose`: the beat could not be
 * counted, health said 503 for good while every create was 201, and a restore from a snapshot taken meanwhile handed
 * ids 12-15 out again (attack61 F8).
 */
function aclKeysChecked(pairs: readonly (readonly [command: string, key?: string])[]): string {
  if (pairs.length === 0) return ''
  return `for _, pair in ipairs({${pairs.map(([command, key]) => (key === undefined ? `{'${command}'}` : `{'${command}', ${luaString(key)}}`)).join(', ')}}) do
  local known, allowed
  if pair[2] then known, allowed = pcall(redis.acl_check_cmd, pair[1], pair[2]) else known, allowed = pcall(redis.acl_check_cmd, pair[1]) end
  if known and not allowed then return redis.error_reply('NOPERM the sandbox\\'s user may not run ' .. pair[1] .. (pair[2] and (' on the key ' .. pair[2]) or '') .. ' (its ACL): the script was refused before it ran') end
end
`
}

/** `text` as a Lua string literal: every byte but plain ones in a decimal escape (a prefix is the operator's). */
function luaString(text: string): string {
  return `'${Array.from(Buffer.from(text, 'utf8'), (byte) => (/[-A-Za-z0-9:_{}.]/.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `\\${String(byte).padStart(3, '0')}`)).join('')}'`
}


/**
 * The mark a confirmation round writes for a write to `key` (see RedisLink's #round): in the key's slot, named after its
 * hash tag (the first `{…}` holding something), or after the key made the tag.
 * @note Cut at the key's first `}`, a prefix holding a `}` before its `{` named a mark of another slot than the key's
 * (review50 F5).
 * @example markKeyOf('petstore-sandbox:{t}:meta') // 'petstore-sandbox:{t}:replicated'
 */
export function markKeyOf(key: string): string {
  const open = key.indexOf('{')
  const close = open === -1 ? -1 : key.indexOf('}', open + 1)
  if (close > open + 1) return `${key.slice(0, close + 1)}:replicated`
  return (key.includes('}') ? slotFellow(key, ':replicated') : undefined) ?? `{${key}}:replicated`
}

/** Commands the sandbox's scripts call that write nothing. */
const READ_COMMANDS = new Set(['GET', 'HGET', 'HMGET', 'HGETALL', 'HLEN', 'HEXISTS', 'EXISTS', 'TYPE', 'TIME', 'INFO', 'LLEN', 'LRANGE', 'LINDEX', 'ZSCORE', 'ZCARD', 'ZCOUNT', 'ZRANGE', 'ZRANGEBYSCORE', 'ZREVRANGE', 'ZREVRANGEBYSCORE', 'PTTL', 'TTL', 'STRLEN', 'SCAN', 'HSCAN', 'ZSCAN'])

const writingScripts = new WeakMap<RedisScript, boolean>()
/** Whether `script` calls a command that writes (any the {@link READ_COMMANDS} do not list). */
function writes(script: RedisScript): boolean {
  let found = writingScripts.get(script)
  if (found === undefined) {
    found = commandsOf(script.source).some((command) => !READ_COMMANDS.has(command))
    writingScripts.set(script, found)
  }
  return found
}

/** Each script with {@link REPLICA_GUARD} first, once made. */
const guardedScripts = new WeakMap<RedisScript, RedisScript>()

/** `script` with {@link REPLICA_GUARD} first. */
function guarded(script: RedisScript): RedisScript {
  let made = guardedScripts.get(script)
  if (made === undefined) {
    made = redisScript(REPLICA_GUARD + script.source)
    guardedScripts.set(script, made)
  }
  return made
}

/** Redis's refusal of a script's `INFO` (an ACL, or the command renamed away): the guard is then left out a while. */
const INFO_DENIED = /NOPERM|can't run this command|ACL failure in script|[Uu]nknown (?:Redis )?command/

/**
 * Whether a guarded script's error is its guard's `INFO` refused: {@link INFO_DENIED} met on the guard's line, the
 * first (Redis names the line a script failed on: `@user_script:<line>`).
 * @note Any command refused inside the script was taken for INFO: the guard was left out, said as INFO refused, and the
 * script sent again after it may have written in part (the review of attack60's fix: `-zcard`).
 */
export function guardRefused(message: string): boolean {
  // The writes' own ACL check names no line either (an error reply of the script): not the guard's (review50 N1: every
  // write it refused was sent again without the guard).
  if (message.startsWith(OWN_CHECK_REFUSAL)) return false
  // A command named, other than INFO: the script's sending refused (`'evalsha' command`), before any line ran. Taken for
  // INFO (no line: the first), the guard was left out a second, said as INFO refused, when EVALSHA came back just after
  // (attack69 F2).
  const named = /'(\w+)' command/.exec(message)?.[1]
  if (named !== undefined && named.toLowerCase() !== 'info') return false
  return INFO_DENIED.test(message) && (/@user_script:(\d+)/.exec(message)?.[1] ?? '1') === '1'
}

/** How the sandbox's own ACL checks (see {@link aclChecked}) begin their refusal. */
const OWN_CHECK_REFUSAL = "NOPERM the sandbox's user may not"

/**
 * How long scripts go without {@link REPLICA_GUARD} once Redis refused its `INFO`, before it is tried again (ms): a
 * script sent twice a second while it is refused.
 * @note 10 s first: with --redis-allow-eviction (no reading of Redis each second to bring it back sooner), a switchover
 * 0.3 s after INFO was allowed again lost 2,855 201s, ids handed out twice (attack59 F3).
 */
const GUARD_RETRY_MS = 1000

/**
 * Lua: `now`, Redis's own clock in ms. @note Every time stored or compared in Redis (last write,
 * last use, the registry's scores, the sweep's cut-off) is Redis's: replicas' clocks may differ,
 * and one running a month ahead would otherwise see every tenant idle (issue 20 F11).
 */
export const NOW = `local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)`

/**
 * While an evicting policy refuses scripts, requests read it again at most this often (ms), one
 * read shared by every request waiting on it: service returns within about this long of the fix,
 * on every replica and worker, without a health probe. While it is accepted, requests read it in
 * the background as often, so a policy changed on a running Redis is refused within about as long.
 */
export const EVICTION_RECHECK_MS = 1000

/** How often (ms) each process reads the epoch token and counts its beat (see RedisLink.watchEpoch). */
const EPOCH_READ_MS = 1000
/** Lua: the epoch token in KEYS[1], written as ARGV[1] when there is none. */
const EPOCH_TAKEN = `redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])`

/**
 * How often (ms) a master's replicas are counted again (`INFO replication`, in the background) while
 * its tenants write: a replica attached or gone is waited for, or no longer, within about this long.
 */
const REPLICAS_READ_MS = 1000
/**
 * The longest (ms) one `WAIT` blocks the connection it is sent on: a replica that does not confirm
 * holds the master's other commands on this connection at most this long at a time (they go
 * between one `WAIT` and the next); a write is waited for by as many as its request's time allows.
 */
const REPLICA_WAIT_SLICE_MS = 250
/**
 * A master whose replicas did not confirm a write stays "behind" (health degraded) until one
 * confirms at least this long (ms) after the last write they did not: a replica at the edge of the
 * requests' time flapped health and the log with every other write (attack18 F4).
 */
const BEHIND_HOLD_MS = 10_000
/**
 * While Redis's ACL refuses a command or key (see RedisLink's #denied), how often (ms) a command that passes sends the
 * write probe to learn whether it is over; on a cluster (no probe), how long health stays degraded after the last one.
 */
const DENIED_HOLD_MS = 3000
/** How often (ms) a process reads again the replicas other processes expect (see RedisLink's sharedExpected). */
const REPLICAS_SHARE_MS = 30_000

/** While a replica writes, it reads Redis's clock again at most this often (ms): see {@link RedisLink.redisNow}. */
const CLOCK_READ_MS = 1000
/** How many runs (`run_id`) of each server the counts of keys evicted are kept for: a failover and back finds the first's. */
const EVICTED_RUNS = 8

/** A server's count of keys it evicted (`INFO`'s `evicted_keys`), and the run counting them (`run_id`: a restart counts from 0). */
interface EvictedCount {
  readonly runId: string
  readonly count: number
  /** The master (`host:port`) it replicates, when the same `INFO` says it is a replica. */
  readonly replicaOf?: string | undefined
}

/** What a sandbox knows of the keys it serves from (see RedisLink.watchEpoch): the token it took, and the beat Redis must hold at least. */
export interface RedisEpoch {
  readonly token: string
  readonly beat: number
  /** Why storage was taken for lost (every request refused until restart), once it was. */
  readonly lost?: string | undefined
}

/** A reading of Redis's clock is kept over a later, looser one (an answer that took longer) this long (ms). */
const CLOCK_KEEP_MS = 5000
/** On a cluster, masters' clocks further apart than this (ms) are told to the operator. */
const CLOCK_SKEW_MS = 1000
/** On a cluster, how many tenants' masters' clock readings are kept at most (see {@link RedisLink.redisNow}). */
const TAG_CLOCKS = 4096
/**
 * How far Redis's clock and this process's monotonic clock may run apart per ms after a reading:
 * 1 ms a second, twice the most NTP slews a clock (500 ppm). An estimate is made that much earlier.
 */
const CLOCK_DRIFT = 0.001
/**
 * A reading this old (ms) is read again before an estimate is given (not in the background): the
 * drift allowance then stays small (a replica idle for an hour would otherwise take 3.6 s off).
 */
const CLOCK_STALE_MS = 10_000

/** A command not sent: the request it serves has no time left (not a failure of Redis). */
class RequestTimeUp extends StorageUnavailableError {}

/**
 * A script that was sent and then failed without an answer (a timeout, a connection dropped
 * after sending): Redis may or may not have run it. The storage finds out before answering
 * (`RedisStorage.create`). A failure known to leave the script unsent (the client offline or
 * closed, the request's time up before sending) is a plain {@link StorageUnavailableError}.
 */
export class RedisOutcomeUnknown extends StorageUnavailableError {}

/** A command node-redis refused before writing it (offline, closed, timed out while queued). */
class NotSent extends Error {}

/** A refusal of Redis for being a replica (see RedisLink's #replicaRefusal). */
const REPLICA_REFUSAL = /^it is a replica of /
/** The refusal of a Redis whose eviction policy its user may not read (CONFIG and INFO refused). */
const POLICY_UNREAD_TEXT = 'its maxmemory-policy could not be read'
const POLICY_UNREAD = new RegExp(`^${POLICY_UNREAD_TEXT}`)
/** The refusal of a Redis whose role its user may not read (INFO and ROLE refused): it may be a replica. */
const ROLE_UNREAD = /^whether it is a replica cannot be read/

/** How long a refusal of Redis lasts, as the operator is told. */
function refusedUntil(reason: string): string {
  if (REPLICA_REFUSAL.test(reason)) return 'until it is a master again (or point --redis-url at the master)'
  if (ROLE_UNREAD.test(reason)) return "until INFO or ROLE is allowed for the sandbox's Redis user"
  if (POLICY_UNREAD.test(reason)) return "until CONFIG or INFO is allowed for the sandbox's Redis user"
  return 'until it is set to noeviction (or start with --redis-allow-eviction)'
}

/** A refusal's kind, for saying a new one when it changes (review48 F3: a policy that could not be read, then a replica). */
function refusalKind(reason: string): string {
  for (const [kind, pattern] of [['replica', REPLICA_REFUSAL], ['role', ROLE_UNREAD], ['policy', POLICY_UNREAD]] as const) if (pattern.test(reason)) return kind
  return 'evicts'
}

/** What the operator is told to do about a refusal at start. */
function startAdvice(reason: string): string {
  if (REPLICA_REFUSAL.test(reason)) return 'Point --redis-url at the master.'
  if (ROLE_UNREAD.test(reason)) return "Allow INFO (or at least ROLE) for the sandbox's Redis user."
  if (POLICY_UNREAD.test(reason) && INFO_DENIED.test(reason)) return "Allow CONFIG (or INFO) for the sandbox's Redis user, or accept evictions with --redis-allow-eviction."
  if (POLICY_UNREAD.test(reason)) return 'Check that Redis answers, or accept evictions with --redis-allow-eviction.'
  return 'Set maxmemory-policy noeviction on it, or accept the loss with --redis-allow-eviction.'
}

/** Redis's error reply to a command (`LOADING`, `READONLY`, a script's own error): an answer. */
class ErrorReplied extends Error {}

/** An error a script raised on purpose (`redis.error_reply('NOSEED')`): not a storage failure. */
export class RedisScriptRefusal extends Error {
  override readonly name = 'RedisScriptRefusal'
}

type Reply = unknown
/** Sends one command; it fails when not answered within `ms`. */
type Send = (firstKey: string | undefined, args: string[], ms: number) => Promise<Reply>
/** Sends one command to one server that holds data, by its address ({@link Connection.servers}); it fails when not answered within `ms`. */
type SendTo = (server: string, args: string[], ms: number) => Promise<Reply>

/** When the Redis work of the request being served must be over (ms since the epoch). */
const requestDeadline = new AsyncLocalStorage<{ readonly at: number; warned: boolean }>()

/**
 * Runs `task` (the handling of one HTTP request) so that every Redis command it leads to, up to
 * its answer and journal entry, ends by `deadline` (ms since the epoch): a command is given what
 * is left of that time, at most the command timeout, and one sent past it fails at once with a
 * {@link StorageUnavailableError}. So a request meeting Redis failures several times (its
 * tenant's scenario, a script and its resend, the journal entry of its 503) still ends in time.
 * Outside such a task, commands have the command timeout each.
 */
export function withRedisDeadline<T>(deadline: number, task: () => T): T {
  return requestDeadline.run({ at: deadline, warned: false }, task)
}


/**
 * The deadline {@link withRedisDeadline} gives a request's Redis work: the request timeout less
 * a margin (a tenth, at most 500 ms) for answering.
 */
export function redisDeadlineFor(requestTimeoutMs: number, now = monotonicNow()): number {
  return now + requestTimeoutMs - answerMargin(requestTimeoutMs)
}

/** The time {@link redisDeadlineFor} keeps for answering: a tenth of the request timeout, at most 500 ms. */
const answerMargin = (requestTimeoutMs: number) => Math.min(500, requestTimeoutMs / 10)

/**
 * The longest simulated delay (`Prefer: delay`, a scenario's latency) a request on Redis may ask
 * for: its Redis work shares the request's deadline, so a delay is given what leaves Redis one
 * command timeout (at most a quarter of the request timeout). A longer `Prefer: delay` is refused
 * at once (400 `invalid_prefer`, naming this limit), where it was answered 503 from a healthy Redis.
 */
export function redisDelayLimit(requestTimeoutMs: number, commandTimeoutMs = DEFAULT_REDIS_COMMAND_TIMEOUT_MS): number {
  return Math.max(0, Math.floor(requestTimeoutMs - answerMargin(requestTimeoutMs) - Math.min(commandTimeoutMs, requestTimeoutMs / 4)))
}

/** One client (standalone or cluster) of a {@link RedisLink}. */
interface Connection {
  readonly send: Send
  readonly sendTo: SendTo
  /** The servers holding data: `''` for the one Redis; each master's `host:port` on a cluster (none while its slots are not known). */
  servers(): string[]
  /** The server `key`'s commands go to: `''` for the one Redis; its slot's master on a cluster, undefined when not known. */
  serverOf(key: string | undefined): string | undefined
  /** Settles once the client is connected (slots discovered, for a cluster). */
  readonly connecting: Promise<void>
  /** Makes the client the link's current one (its errors are reported from then on). */
  adopt(): void
  /** Stops taking commands: those in flight are answered (or given up on after `ms`), then the client is closed; settles then. */
  retire(ms: number): Promise<void>
  close(): void
}

/**
 * The hash slot of `key` on a Redis Cluster: CRC16 (XMODEM) of its hash tag (the text between its
 * first `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
 * @internal exported for its test
 * @example keySlot('somekey') // 11058, as `CLUSTER KEYSLOT somekey` says
 */
export function keySlot(key: string): number {
  const open = key.indexOf('{')
  const close = open === -1 ? -1 : key.indexOf('}', open + 1)
  const hashed = close > open + 1 ? key.slice(open + 1, close) : key
  let crc = 0
  for (const byte of Buffer.from(hashed, 'utf8')) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc & 16383
}

/**
 * A key named after `key` and `suffix` in `key`'s hash slot (a script runs on the keys of one
 * slot on a Cluster): `key` and `suffix` when `key` has a hash tag, else `key` made the tag;
 * undefined when neither is (a `}` in a key of no tag).
 * @example slotFellow('petstore-sandbox:epoch:beat', ':loose') // '{petstore-sandbox:epoch:beat}:loose'
 */
export function slotFellow(key: string, suffix: string): string | undefined {
  return [`${key}${suffix}`, `{${key}}${suffix}`].find((candidate) => keySlot(candidate) === keySlot(key))
}

/** A key read by the epoch's check that holds another type of value than a string (see `RedisLink#read`). */
const NO_USE = Symbol('no use')

/**
 * Where the beat of the epoch token `epochKey` is counted: `<epochKey>:beat`, the name every
 * version reads on one Redis; on a Cluster the key of that name in the token's slot, so that the
 * master holding the token holds the beat too (its check after a failure reads both, and a
 * restore of it from an older snapshot takes the beat back with it).
 * @note `<epochKey>:beat` hashes to another slot than the token: on a Cluster they were on two
 * masters, and a restore of the token's master, the one watched, went unnoticed (attack35 F3:
 * 354 creates answered 201 gone, their ids handed out again, health ok).
 * @example beatKeyOf('petstore-sandbox:epoch', true) // '{petstore-sandbox:epoch}:beat'
 */
export function beatKeyOf(epochKey: string, cluster: boolean): string {
  return (cluster ? slotFellow(epochKey, ':beat') : undefined) ?? `${epochKey}:beat`
}

/** A key's hash tag (`{tenant}`: a tenant's keys share one), or the key when it has none: what {@link RedisLink}'s clock readings are kept by. */
function hashTag(key: string): string {
  return /\{[^}]*\}/.exec(key)?.[0] ?? key
}

/**
 * A client (standalone or cluster) still failing this long is replaced by a new one.
 * @note Seen in the cluster master-loss test under load: after a master came back, node-redis's
 * cluster client kept every command to its slots unanswered (each timing out) for 40 s and more;
 * a fresh client discovers the slots anew. Its cause, a connection reset during node-redis's
 * greeting leaving a client "ready" on a closed socket, is removed by `disableClientInfo` (see
 * {@link connectRedis}; test/redis/redis-restart.test.ts produces it on demand): this renewal,
 * which rescued such a client only 5 s on, stays as a second line
 * (docs/decisions/0005-redis-replicas.md).
 * @note Standalone clients too (attack2 F2): a connection that stays open but silent (a wedged
 * peer, a middlebox that forgot it) is never noticed by node-redis, whose commands then time out
 * one by one forever, Redis healthy; a worker answered 503 to half the requests for over 7 min.
 * A new client opens a new connection. Safe for writes in flight: a write sent on the old
 * connection and settled on the new one is voided if it has not run (`redis-outcomes.ts`).
 */
const RENEW_AFTER_FAILING_MS = 5000

/** Options of {@link connectRedis}. */
export interface RedisLinkOptions {
  readonly url: string
  /** @default {@link DEFAULT_REDIS_COMMAND_TIMEOUT_MS} */
  readonly commandTimeoutMs?: number | undefined
  /** @default {@link DEFAULT_REDIS_CONNECT_TIMEOUT_MS} */
  readonly connectTimeoutMs?: number | undefined
  /** Told when Redis fails and when it answers again. @default none */
  readonly warn?: ((message: string) => void) | undefined
  /**
   * When Redis does not answer within the connect timeout: `refuse` rejects (a wrong URL is said
   * at once); `serve` returns the link all the same, failing every command with a
   * {@link StorageUnavailableError} (503) until Redis answers, as after a drop (`warn` is told).
   * @default 'refuse'
   */
  readonly unreachableAtStart?: 'refuse' | 'serve' | undefined
  /**
   * Accept a Redis whose `maxmemory-policy` may evict keys (anything but `noeviction`): evicted
   * keys are acknowledged writes lost. Without it such a Redis is refused at start, and scripts
   * (every read and write of a tenant) answer 503 while a Redis met on reconnecting has such a policy.
   * @default false
   */
  readonly allowEviction?: boolean | undefined
  /**
   * Answer a write once its master has it, without waiting for one of its replicas to confirm it:
   * a failover to a replica that lagged then loses writes answered as applied (and hands their ids
   * out again). Without it, where a master has replicas online, a create, switch or reset is
   * answered once every replica online has it (`WAIT`), and `503 write_outcome_unknown` when they do not
   * confirm it within the request's time (see {@link RedisLink.script}).
   * @default false
   */
  readonly allowFailoverLoss?: boolean | undefined
  /**
   * The key of the write that changes nothing (`SET … XX`, see writeProbeScript) with which the start
   * and health ask a Redis whether it takes writes: a key the sandbox's Redis user may write.
   * @default 'petstore-sandbox:write-probe'
   */
  readonly probeKey?: string | undefined
  /**
   * How many replicas every master has (the operator's word): a write is answered as applied once
   * that many, and every replica online, have it; with fewer online, `503 write_outcome_unknown`
   * at once. Without it, the most replicas seen online at once since the master's replication
   * history began (kept in Redis for every process), on a Cluster those `CLUSTER NODES` lists.
   */
  readonly replicas?: number | undefined
  /** Where the replicas expected are kept for every process (see RedisLink). @default 'petstore-sandbox:replicas' */
  readonly replicasKey?: string | undefined
  /** Where the token that tells the sandbox's keys are still there is kept (see RedisLink's epoch). @default none: not watched */
  readonly epochKey?: string | undefined
  /**
   * The epoch (token and beat) a process this one replaces last knew (as its `onEpoch` said): taken
   * as this process's own from the start, so that a Redis that went back in time or lost its keys
   * before this one started is refused from its first command, not taken for a new Redis.
   * @note A worker of `--workers` started in place of one that died during an outage served what
   * Redis came back with (an older snapshot, or empty), health ok, and handed ids out again while
   * its sibling refused (attack39 F6).
   */
  readonly epoch?: RedisEpoch | undefined
  /** Told the epoch each time this process knows a newer one (its token taken, its beat confirmed higher): at most once a second. */
  readonly onEpoch?: ((epoch: RedisEpoch) => void) | undefined
  /**
   * With `unreachableAtStart: 'serve'`: this process starts in place of (or beside) one that serves: what a running one
   * would be refused (an evicting policy, a replica, replicas that cannot be counted, an ACL refusal) it serves refused
   * (503), not refused at start. An `epoch` handed implies it.
   * @note Told only by an epoch, a worker replacing one of a sandbox that never took the token (started while Redis was
   * down, back with scripts refused) exited at start again and again, nothing answering for 11 s (attack61 F6).
   */
  readonly replacing?: boolean | undefined
  /** What the write probe asks the ACL for besides the link's own keys: the keys a store's writes share, each with a command run on it (see RedisLink's probeAlso). */
  readonly probeAlso?: readonly (readonly [command: string, key?: string])[] | undefined
  /**
   * Where the epoch's beat is counted (see RedisLink's epoch), beside {@link epochKey}. @default
   * `<epochKey>:beat`; on a Cluster `{<epochKey>}:beat`, in the token's slot (see {@link beatKeyOf}).
   */
  readonly beatKey?: string | undefined
}

/**
 * Connects to Redis (or a cluster) and waits until it answers. Refuses with a
 * {@link PetstoreError} when `redis` is not installed, the URL is bad, or Redis does not answer
 * within the connect timeout.
 */
export async function connectRedis(options: RedisLinkOptions): Promise<RedisLink> {
  const target = parseRedisUrl(options.url)
  const redis = await loadClient()
  const timeout = options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS
  const warn = options.warn ?? (() => undefined)
  // @note disableOfflineQueue: while Redis is unreachable a command fails at once (503) instead of
  // waiting in memory for a reconnect that may never come; commands in flight when the connection
  // drops fail too and are never re-sent, so a create is never applied twice.
  // @note disableClientInfo: node-redis (5.9) greets each new connection with CLIENT SETINFO and
  // ignores that greeting's failures, so a connection reset before Redis answered it (what a Redis
  // being killed -9 does to the reconnect node-redis makes at once) still counted as ready: the
  // client kept writing to a closed socket, never reconnected, and every command went unanswered
  // for good (503s until the replica restarted). With no greeting, a connection is ready as soon
  // as it opens, and its reset is an ordinary drop that node-redis reconnects from; a greeting
  // that is needed (AUTH, SELECT) fails the connection when it fails, which node-redis retries.
  const common = {
    disableOfflineQueue: true,
    disableClientInfo: true,
    socket: {
      connectTimeout: Math.min(timeout, 5000),
      // Reconnect forever, backing off up to 1 s: a replica recovers by itself when Redis returns.
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 5), 1000),
    },
  } satisfies RedisClientOptions
  /**
   * Marks node-redis's refusals to write a command (offline, closed, timed out in its queue) and
   * Redis's error replies, so that only a command sent and never answered counts as ambiguous.
   */
  const notSent = (error: unknown): never => {
    // A command flushed from a socket that met itself was never written (see self-connect.ts).
    if (error instanceof SelfConnected) throw new NotSent(messageOf(error), { cause: error })
    if (error instanceof redis.ClientOfflineError || error instanceof redis.ClientClosedError || error instanceof redis.TimeoutError) throw new NotSent(messageOf(error), { cause: error })
    if (error instanceof redis.ErrorReply) throw new ErrorReplied(messageOf(error), { cause: error })
    throw error
  }
  let link: RedisLink | undefined
  /** The last failure seen while connecting, for the refusal's message. */
  let lastError: unknown
  let started = false
  /** Opens a client; its errors count only while it is the link's current one. */
  const open = (): Connection => {
    let current = false
    const onError = (error: unknown) => {
      if (!started) lastError = error
      else if (current && link) link.failed(error)
    }
    if (target.mode === 'standalone') {
      const client = redis.createClient({ ...common, url: target.urls[0] })
      const port = [portOf(target.urls[0]!)]
      const watching = dropSelfConnects(() => port)
      client.on('error', onError)
      // @note Not node-redis's 'ready' for "recovered": it comes as soon as a connection opens,
      // while a restarted Redis may still answer every command LOADING (node-redis#2667); a
      // command answered says so instead (RedisLink.call).
      const send: Send = (_key, args, ms) => bounded(client.sendCommand(args, { timeout: ms }).catch(notSent), ms)
      return {
        send,
        sendTo: (_server, args, ms) => send(undefined, args, ms),
        servers: () => [''],
        serverOf: () => '',
        connecting: client.connect().then(() => undefined),
        adopt: () => (current = true),
        retire: (ms) => {
          current = false
          return retire(client, ms).finally(watching)
        },
        close: () => {
          watching()
          client.destroy()
        },
      }
    }
    const cluster = redis.createCluster({
      rootNodes: target.urls.map((url) => ({ url })),
      defaults: { ...common, ...credentials(target.urls[0]!) },
    })
    const rootPorts = target.urls.map(portOf)
    const watching = dropSelfConnects(() => [...rootPorts, ...[...cluster.masters, ...cluster.replicas].map((node) => node.port)])
    cluster.on('error', onError)
    // @note node-redis asked for a slot no master serves (a cluster not yet created, every master of
    // the slot down) throws a TypeError of its own, which was the operator's only clue (attack21 L1).
    const noSlot = (error: unknown): never => {
      if (error instanceof TypeError) throw new NotSent('the cluster serves no slot for this key now (CLUSTER INFO says cluster_state:fail: create the cluster, or bring a master of the slot back)', { cause: error })
      return notSent(error)
    }
    return {
      send: (key, args, ms) => bounded(Promise.resolve().then(() => cluster.sendCommand(key, false, args, { timeout: ms })).catch(noSlot), ms),
      sendTo: (server, args, ms) => {
        const master = cluster.masters.find((candidate) => candidate.address === server)
        if (master === undefined) return Promise.reject(new NotSent(`master ${server} serves no slot now`))
        return bounded(Promise.resolve(cluster.nodeClient(master)).then((node) => node.sendCommand(args, { timeout: ms })).catch(notSent), ms)
      },
      servers: () => cluster.masters.map((master) => master.address),
      serverOf: (key) => (key === undefined ? undefined : cluster.slots[keySlot(key)]?.master.address),
      connecting: cluster.connect().then(() => undefined),
      adopt: () => (current = true),
      retire: (ms) => {
        current = false
        return retire(cluster, ms).finally(watching)
      },
      close: () => {
        watching()
        cluster.destroy()
      },
    }
  }
  const connected = new RedisLink(target, open, warn, {
    renewAfterMs: RENEW_AFTER_FAILING_MS,
    // @note A standalone client is renewed only for commands that go unanswered: a Redis answering
    // errors (LOADING) or refused at once (down: node-redis reconnects by itself) gains nothing from it.
    renewOn: target.mode === 'cluster' ? 'any' : 'unanswered',
    commandTimeoutMs: timeout,
    allowEviction: options.allowEviction,
    allowFailoverLoss: options.allowFailoverLoss,
    replicas: options.replicas,
    probeKey: options.probeKey,
    replicasKey: options.replicasKey,
    epochKey: options.epochKey,
    beatKey: options.beatKey,
    epoch: options.epoch,
    onEpoch: options.onEpoch,
    probeAlso: options.probeAlso,
  })
  link = connected
  const limit = options.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      // A PING its ACL refuses is Redis answering: the probe is the sandbox's own (attack60 F3).
      connected.connecting.then(() => connected.call(undefined, ['PING'], { own: true }).catch(answeredIfDenied)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${limit} ms${lastError === undefined ? '' : ` (${messageOf(lastError)})`}`)), limit)
      }),
    ])
  } catch (error) {
    // @note Started from a handed epoch (options.epoch) that Redis no longer matches: storage lost
    // (said), not unreachable: it serves, answering 503 storage_unavailable, as promised, rather than
    // refuse to start as if Redis were down (the review of attack39 F6's fix).
    if (connected.lostStorage) {
      started = true
      return connected
    }
    if (options.unreachableAtStart === 'serve') {
      // The client goes on reconnecting (or, in a cluster, is renewed): the link recovers by itself.
      started = true
      connected.failed(new Error(`no answer at start (${messageOf(error)})`))
      // The token is read once Redis answers (each second until then).
      void connected.watchEpoch()
      return connected
    }
    await connected.close().catch(() => undefined)
    throw new PetstoreError('invalid_option', `Cannot reach Redis at ${target.display}: ${messageOf(error)}. Start it, or check --redis-url.`)
  } finally {
    clearTimeout(timer)
  }
  let policyRead = true
  const evicting = await connected.checkEviction().catch((error: unknown) => {
    policyRead = false
    return `${POLICY_UNREAD_TEXT} (${messageOf(error)})`
  })
  // @note A worker (`serve --workers`: 'serve') started in place of one that died while Redis could
  // evict keys exited at once, again and again: connections refused, no 503, no health (attack43 F2).
  // It starts, refusing what uses that Redis as a sandbox running meets it, until it is fixed.
  // A worker serving refused (as a running one does): the checks below would only refuse it again, and make it exit.
  const replacing = options.unreachableAtStart === 'serve' && (options.epoch !== undefined || options.replacing === true)
  const servingRefused = evicting !== undefined && options.unreachableAtStart === 'serve' && (policyRead || replacing)
  if (evicting !== undefined && policyRead && options.unreachableAtStart === 'serve') {
    warn(`storage refused: Redis at ${target.display}: ${evicting}; answering 503 storage_unavailable to requests that use it ${refusedUntil(evicting)}`)
  } else if (evicting !== undefined && replacing) {
    // @note A worker started in place of another (an epoch handed) serves as the one it replaces does: answering 503
    // until the policy can be read again. Refused, with CONFIG and INFO both denied, replacements exited again and
    // again, and with both workers gone nothing answered, health included (attack59 F1).
    warn(`storage refused: Redis at ${target.display}: ${evicting}; answering 503 storage_unavailable to requests that use it ${refusedUntil(evicting)}`)
    connected.readPolicyOnUse(evicting)
  } else if (evicting !== undefined && !REPLICA_REFUSAL.test(evicting)) {
    await connected.close().catch(() => undefined)
    throw new PetstoreError('invalid_option', `Cannot use Redis at ${target.display}: ${evicting}. ${startAdvice(evicting)}`)
  }
  // @note Replicas that cannot be counted cannot be waited for: the confirmation was off silently (attack18 F5).
  if (!options.allowFailoverLoss) {
    const uncounted = await connected.replicasUncounted().catch(() => undefined)
    // @note A worker started in place of another (an epoch handed) serves as the one it replaces did: writes answered
    // write_outcome_unknown until INFO and WAIT are allowed. Refused, while INFO was taken away, replacements exited again
    // and again, and with both workers gone nothing answered, health included (attack57 F5).
    if (uncounted !== undefined && replacing) {
      warn(`storage replicas: Redis at ${target.display}: its replicas cannot be counted or waited for (${uncounted}): writes are answered 503 write_outcome_unknown until INFO and WAIT are allowed for the sandbox's Redis user`)
    } else if (uncounted !== undefined) {
      await connected.close().catch(() => undefined)
      throw new PetstoreError('invalid_option', `Cannot use Redis at ${target.display}: its replicas cannot be counted or waited for (${uncounted}), so writes cannot wait for them. Allow INFO and WAIT for the sandbox's Redis user, or accept that a failover may lose writes with --redis-allow-failover-loss.`)
    }
  }
  // @note A read-only replica or a user without write rights was "running", every write refused (attack17 C1).
  // A worker's start ('serve') meets a replica as a running sandbox does: refused until it is a master (attack46 F2).
  // @note Any refusal: a replacement refused for a policy it could not read, on a master demoted since, exited at the
  // replica check below, again and again (review48 F1).
  if (target.mode === 'standalone' && !servingRefused) {
    // @note A writable replica (`replica-read-only no`) took writes its master's next sync erased (attack19 W1).
    const master = await connected.masterOf().catch(() => undefined)
    if (master !== undefined) {
      await connected.close().catch(() => undefined)
      throw new PetstoreError('invalid_option', `Cannot use Redis at ${target.display}: it is a replica of ${master}, and what is written to it is lost at its next sync. Point --redis-url at the master.`)
    }
    // Asked quietly: a start about to be refused said first that it would answer 503 (trial5 P10).
    const refusal = await connected.writesRefused()
    // @note A worker started in place of another (an epoch handed) serves refused as the one it replaces does: with
    // scripts or writes taken from its user, replacements exited again and again, and with both workers gone nothing
    // answered, health included, a back-off keeping it so well after the ACL was fixed (attack60 F2).
    if (refusal !== undefined && ACL_REFUSAL.test(refusal) && replacing) connected.deniedAtStart(refusal)
    else if (refusal !== undefined && /READONLY|NOPERM|can't run this command|can't access|ACL failure in script/.test(refusal)) {
      await connected.close().catch(() => undefined)
      throw new PetstoreError('invalid_option', `Cannot use Redis at ${target.display}: it refuses writes (${refusal.replace(/^.*?refuses writes: /, '')}). Point --redis-url at the master, as a user allowed to run scripts and write.`)
    }
  }
  if (!options.allowFailoverLoss) {
    const missing = await connected.replicasMissing().catch(() => undefined)
    if (missing !== undefined) warn(`storage replicas: ${missing}`)
  }
  started = true
  await connected.watchEpoch()
  return connected
}

/** Whether `error` is Redis refusing the sandbox's user a command or key (see {@link ACL_REFUSAL}). */
function aclRefusal(error: unknown): boolean {
  return error instanceof ErrorReplied && ACL_REFUSAL.test(messageOf(error))
}

/**
 * What an ACL refusal is about, to tell one refusal from another: the command named (`'hset' command`, `may not run
 * HSET`), or keys; else the message without the script's sha and line (two scripts refused alike are one refusal).
 */
function deniedKind(message: string): string {
  const command = /may not run (\w+)|'(\w+)' command/.exec(message)
  if (command !== null) return (command[1] ?? command[2]!).toUpperCase()
  if (/\bkeys?\b/.test(message)) return 'keys'
  return message.replace(/\s*script: [0-9a-f]{40}, on @user_script:\d+\.?/, '')
}

/** Passes over an ACL refusal (Redis answering); rethrows anything else. */
function answeredIfDenied(error: unknown): undefined {
  if (aclRefusal(error)) return undefined
  throw error
}

/** Closes a client once the commands it has in flight are answered, or after `ms` whatever they wait for; settles once closed. */
function retire(client: { close(): Promise<void>; destroy(): void }, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      try {
        client.destroy()
      } catch {
        // Closed already.
      }
      resolve()
    }, ms)
    timer.unref()
    client.close().then(
      () => {
        clearTimeout(timer)
        resolve()
      },
      () => {
        clearTimeout(timer)
        resolve()
      },
    )
  })
}

/**
 * A command's reply, or a rejection once `ms` have passed.
 * @note node-redis's own `timeout` covers only the wait to be written: once a command is on the
 * wire, a Redis that hangs (stopped, swapping, a stuck network) would hold the request forever.
 * A command given up on here may still run later, so a create answered 503 may yet be stored.
 */
function bounded<T>(reply: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  // The abandoned reply may still reject later (the connection closing): nobody waits for it.
  reply.catch(() => undefined)
  return Promise.race([reply, expired]).finally(() => clearTimeout(timer))
}

/** The username and password of a cluster's URL, given to every node it discovers. */
function credentials(url: string): { username?: string; password?: string } {
  const parsed = new URL(url)
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
  }
}

async function loadClient(): Promise<typeof Redis> {
  try {
    return await import('redis')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new PetstoreError('invalid_option', '--redis-url needs the optional dependency redis (node-redis): run `npm install redis@5`')
    }
    throw new PetstoreError('invalid_option', `--redis-url needs redis (node-redis), which failed to load: ${messageOf(error)}`)
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * What a {@link RedisLink} knows of one server holding data: the one Redis, or one master of a
 * cluster (by its `host:port`). Each fails, recovers and has its eviction policy read on its own.
 * @note One record for the whole cluster made every command wait for a policy read sent to every
 * master after any failure: one master stalled for 8 s held every tenant's requests, on healthy
 * masters too, and answered them 503 (attack11 R7).
 */
interface Server {
  /**
   * `''`: the one Redis, or on a cluster the client as a whole (a command whose slot's master is
   * not known, a failing discovery); else a master's `host:port`.
   */
  readonly address: string
  /** What failed, while it fails. */
  failing: string | undefined
  failingSince: number
  /** Since when commands to it have gone unanswered (with `renewOn: 'unanswered'`), or undefined. */
  unansweredSince: number | undefined
  /** Its policy must be read before the next command to it: it failed (it may come back another, or reconfigured), or was never read. */
  checkDue: boolean
  /** The policy read in flight, which every command to it waits for. */
  checking: Promise<void> | undefined
  /** When its policy was last read (monotonic ms). */
  checkedAt: number
  /** Why scripts to it are refused: it may evict keys (see {@link RedisLink.checkEviction}). */
  evicting: string | undefined
  /** Its count of keys evicted at the last policy read of each run seen (see {@link EvictedCount}), by `run_id`: the last {@link EVICTED_RUNS}. */
  evictedSeen: Map<string, number>
  /** It answers again after failing, and its policy has not been read since (the log says which it is). */
  recoveredUnchecked: boolean
  /** How many replicas it had online when last counted (see {@link RedisLink.script}'s `confirm`), undefined before. */
  replicas: number | undefined
  /** How many replica links it listed still syncing in full at that count (not online yet; port 0 left out). */
  replicasSyncing: number
  /**
   * How many replicas it is expected to have (see {@link RedisLinkOptions.replicas}): declared, or
   * the most seen online at once in its replication history (on a Cluster, those the cluster lists).
   */
  replicasExpected: number
  /** On a Cluster, whether `CLUSTER NODES` says one of its replicas is failing (`fail`, `fail?`): missing, whatever else is online. */
  replicaFailing: boolean
  /** Why its replicas cannot be counted since `INFO` was last refused (its user reconfigured while serving), or undefined. */
  replicasUncounted: string | undefined
  /** Its replication history's id (`master_replid`) at the last count: a new one (a promotion) starts the count expected anew. */
  replid: string | undefined
  /** When this process last read the count other processes expect (see RedisLink's sharedExpected). */
  replicasSharedAt: number
  /** Its replicas' addresses as the counts saw them (see {@link settledExpectation}). */
  replicaAddresses: ReplicaAddresses
  /** The next count, due a second on while fresh links are not yet expected (see {@link settledExpectation}). */
  replicasRecount: ReturnType<typeof setTimeout> | undefined
  /** When its replicas were last counted (monotonic ms). */
  replicasReadAt: number
  /** The count in flight. */
  replicasReading: Promise<void> | undefined
  /** Why writes to it are answered unknown: no replica confirmed one in time (said once; health is degraded until one does), and a key of the tenant, for health's probe. */
  behind: { readonly detail: string; readonly key: string; readonly at: number; readonly said: string; readonly saidAt: number } | undefined
  /** Why it refuses writes while answering (full under noeviction, a read-only replica, an ACL user without write rights), and a key of the tenant refused, for health's probe. */
  refusing: { readonly detail: string; readonly key: string; readonly said: boolean } | undefined
  /** When "storage refusing" was last said (monotonic ms): at most once in {@link BEHIND_HOLD_MS}. */
  refusalSaidAt: number
  /** The last command or key its ACL refused the sandbox's user (see RedisLink's #denied), and when. */
  denied: { readonly detail: string; readonly at: number } | undefined
  /** The kind of the refusal last said (see {@link deniedKind}), and when (monotonic ms): kept once it is over, so that one met again is not said again within {@link BEHIND_HOLD_MS}. */
  deniedSaid: string
  deniedSaidAt: number
  /** Whether a "storage refused" line was said since the last "storage allowed" (which is said only then). */
  deniedTold: boolean
  /** When its write probe was last sent because of a refusal (see RedisLink's #probeDenied). */
  deniedProbedAt: number
  /** It failed since the epoch was last checked on it: the next command to it checks it first (see RedisLink's #epochCheck). */
  epochDue: boolean
  /** That check in flight, which every command to it waits for. */
  epochChecking: Promise<void> | undefined
}

/**
 * Error replies that say Redis answers but refuses writes: full (`OOM`, under noeviction), a
 * read-only replica (`READONLY`: a master demoted by a failover, or the wrong host), an ACL user
 * without the rights (`NOPERM`), a failed snapshot (`MISCONF`), too few replicas (`NOREPLICAS`).
 */
const WRITE_REFUSAL = /^(?:ERR )?(?:Error running script.*?: )?-?(?:(?:OOM|READONLY|NOPERM|MISCONF|NOREPLICAS)\b|The user executing the script can't run this command|ACL failure in script)/

/**
 * Error replies that say Redis refuses the sandbox's user a command or a key (its ACL): Redis
 * answering, not failing (see RedisLink's #denied).
 */
const ACL_REFUSAL = /^(?:ERR )?(?:Error running script.*?: )?-?(?:NOPERM\b|The user executing the script can't (?:run this command|access)|ACL failure in script)/

/** An error a script met as it ran (Redis names the script and line: `script: <sha>, on @user_script:<line>`), not before. */
const IN_SCRIPT = /\bscript: [0-9a-f]{40}|@user_script:/


/**
 * Lua: the mark a confirmation round writes before its WAIT (see ReplicaConfirmation), allowed
 * when Redis is full: a write that frees memory (a journal clear, a tenant delete) was applied and
 * answered unknown, its mark refused OOM (attack19 R1).
 */
const REPLICATION_MARK = redisScript(`#!lua flags=allow-oom
redis.call('SET', KEYS[1], '1', 'PX', '60000')
return 1`)

/**
 * The writes waiting for a replica of one master to confirm them: one round at a time, on a
 * connection of its own, a write that changes nothing but a mark (so that the connection's last
 * write comes after theirs) and `WAIT` for every replica online (Redis counts a connection's writes up to its last one),
 * covers every write whose reply came before it: a burst of writes costs one round trip to the
 * replica, not one each, and the WAIT blocks only that connection.
 * @note The WAIT was sent on the connection the writes went on: while it blocked, every other
 * command of that master waited behind it, reads of other tenants included (attack18 F2: with a
 * replica 100 ms away, one tenant's slow writes took other tenants' reads from 2,000/s to 35/s).
 */
class ReplicaConfirmation {
  readonly #round: (ms: number, key: string) => Promise<RoundResult>
  readonly #replicas: () => Promise<{ readonly state: ReplicaState; readonly replid: string | undefined }>
  #inFlight = false
  #waiting: Waiter[] = []
  #refused: string | undefined

  /**
   * `round`: a mark and a WAIT of at most `ms`, on the master of `key`; resolves to whether every
   * replica counted acknowledged, and the replication history it ran in. `replicas`: the master's
   * replicas and history now, asked when a round ends unconfirmed.
   */
  constructor(round: (ms: number, key: string) => Promise<RoundResult>, replicas: () => Promise<{ readonly state: ReplicaState; readonly replid: string | undefined }>) {
    this.#round = round
    this.#replicas = replicas
  }

  /** @internal Why the last round failed, where Redis refused it to the sandbox's user (its ACL: WAIT, INFO or the mark), or undefined. */
  get refused(): string | undefined {
    return this.#refused
  }

  /**
   * Whether the replicas confirm the writes answered so far (to the tenant of `key`, among others)
   * by `until` (monotonic ms), `history` being the replication history they were written in (the
   * master's `master_replid` before they were sent).
   */
  confirm(until: number, key: string, history: string | undefined): Promise<boolean> {
    return new Promise((resolve) => {
      this.#waiting.push({ until, key, history, resolve })
      this.#next()
    })
  }

  #next(): void {
    if (this.#inFlight || this.#waiting.length === 0) return
    const now = monotonicNow()
    const group = this.#waiting.filter((waiter) => waiter.until > now)
    for (const waiter of this.#waiting) if (waiter.until <= now) waiter.resolve(false)
    this.#waiting = []
    if (group.length === 0) return
    // WAIT 0 would block for good: at least 1 ms.
    const ms = Math.max(1, Math.min(REPLICA_WAIT_SLICE_MS, Math.ceil(Math.max(...group.map((waiter) => waiter.until)) - now)))
    this.#inFlight = true
    void this.#settle(group, ms)
  }

  /** Runs one round for `group` and resolves (or requeues) its writes by what it says. */
  async #settle(group: readonly Waiter[], ms: number): Promise<void> {
    /** Per waiter: true, confirmed (or nothing to wait for); false, not, and never will be in time; undefined, not yet. */
    let outcome: (waiter: Waiter) => boolean | undefined
    try {
      const round = await this.#round(ms, group[0]!.key)
      this.#refused = undefined
      // @note A write is confirmed only in the history it was written in: after a failover behind
      // the same address, a round on the promoted master (no replicas) confirmed writes its old
      // master took and lost (the model-based suite's failover command, seed 20261126).
      const same = (waiter: Waiter) => waiter.history !== undefined && waiter.history === round.replid
      // @note A waiter of an earlier round is confirmed once every replica acknowledged that round's
      // mark, though not this one's: with a replica 150 ms away each way, each round's WAIT (250 ms)
      // ended before the acknowledgement of its own mark came back, the next round wrote a newer one
      // to wait for, and no write was ever confirmed (attack33 F5: one 201 in 8.6 s).
      const caughtUp = (waiter: Waiter) => same(waiter) && waiter.needed !== undefined && round.acked !== undefined && round.acked >= waiter.needed
      if (round.confirmed) outcome = (waiter) => same(waiter)
      else {
        // @note None confirmed: the master may have no replica online any more. Counted again:
        // none ever (or long gone), nothing to wait for; one expected but not online, it cannot
        // confirm (a WAIT with none online blocks its whole time: writes held to the request timeout).
        const now = await this.#replicas().catch(() => ({ state: 'online' as const, replid: round.replid }))
        outcome = (waiter) => (waiter.history === undefined || waiter.history !== now.replid || waiter.history !== round.replid ? false : now.state === 'none' || caughtUp(waiter) ? true : now.state === 'expected' ? false : undefined)
        for (const waiter of group) if (same(waiter)) waiter.needed ??= round.offset
      }
    } catch (error) {
      // Not an answer (the connection failed, an error reply such as a master turned replica): not confirmed.
      outcome = () => false
      this.#refused = aclRefusal(error) ? messageOf(error) : undefined
    }
    this.#inFlight = false
    const now = monotonicNow()
    for (const waiter of group) {
      const confirmed = outcome(waiter)
      if (confirmed !== undefined) waiter.resolve(confirmed)
      else if (waiter.until <= now) waiter.resolve(false)
      // Not yet: the next round covers it too.
      else this.#waiting.push(waiter)
    }
    this.#next()
  }
}

/** A write waiting for its confirmation (see ReplicaConfirmation.confirm). */
interface Waiter {
  readonly until: number
  readonly key: string
  readonly history: string | undefined
  readonly resolve: (confirmed: boolean) => void
  /** The offset of the mark of its first round, in its history: the replicas have its write once they acknowledged that far. */
  needed?: number | undefined
}

/** What one round of a confirmation found: every replica counted has the mark, and the master's replication history then. */
interface RoundResult {
  readonly confirmed: boolean
  readonly replid: string | undefined
  /** The master's replication offset at the round's mark (what a write before the mark is within), when read. */
  readonly offset?: number | undefined
  /** The least offset every replica counted had acknowledged after the WAIT, when as many as expected were counted. */
  readonly acked?: number | undefined
}

/** A command refused on a key holding another type of value than the sandbox writes there (written by hand): Redis is not failing. */
export class WrongTypeError extends StorageUnavailableError {}

/** Redis's reply to a command on a key holding another type of value (also inside a script's error). */
const WRONG_TYPE = /\bWRONGTYPE\b/
/**
 * What to do about `<prefix>replicas` holding the wrong type, as the log says it.
 * @note "Until it is deleted" was the remedy: deleted, the replicas every sandbox had seen were
 * forgotten, and a sandbox started then answered 201 without a replica that was away, lost on
 * promoting it, its ids handed out again (attack26 F6).
 */
export const REPLICAS_KEY_REMEDY =
  'writes are answered 503 write_outcome_unknown until it is deleted; deleting it forgets how many replicas the master had: first restart every sandbox with --redis-replicas <the replicas the master should have> (redisReplicas in the library)'

/**
 * How a script's own refusal begins when a key it would write holds another type of value, before
 * it wrote anything (`redis-outcomes.ts`, `typesBeforeWriting`): a key of the wrong type, and the
 * write not applied, whether it is confirmed by replicas or not.
 */
export const NOTHING_WRITTEN = 'WRONGTYPE nothing written:'

/**
 * Lua: the epoch's beat in KEYS[1] (an integer; none is 0), counted up first with ARGV[1] `1`, or
 * with `L` (loosely: by a sandbox with --redis-allow-failover-loss, whose writes wait for no
 * replica) and then written in KEYS[2] too, the last beat counted loosely; refused, nothing
 * written, when KEYS[1] holds no beat. Answers the beat and the last one counted loosely (`0` for
 * none, or for a value of no use there: it is only read).
 * @note In a key of its own, the token's left as it was: a sandbox of the version before, on the
 * same Redis, took a token written with its beat for another, and refused everything (attack29 F2).
 * @note A beat of no use (written by hand) was read as 0 by idle sandboxes (every request refused
 * as Redis gone back in time), INCR refused for the writing ones (their watch off, nothing said),
 * and one past 2^53 rounded to the one before it (attack30 F3). Answered as text: node-redis
 * reads an integer reply of 16 digits to the nearest even double (9007199254740991 as …992), a
 * beat counted up taken for one already confirmed.
 */
const EPOCH_BEAT = redisScript(`${USABLE_COUNT}
local held = redis.call('GET', KEYS[1])
if held and not usable_beat(held) then return redis.error_reply('${NOTHING_WRITTEN} ' .. KEYS[1] .. ' holds no beat (an integer from 0 below 2^53)') end
if ARGV[1] == '1' or ARGV[1] == 'L' then held = string.format('%d', redis.call('INCR', KEYS[1])) end
local loose = '0'
if KEYS[2] and ARGV[1] == 'L' then
  redis.call('SET', KEYS[2], held)
  loose = held
elseif KEYS[2] then
  local marked = redis.pcall('GET', KEYS[2])
  if type(marked) == 'string' and usable_beat(marked) then loose = marked end
end
return {held or '0', loose}`)

/**
 * Lua, at the end of a write's script sent with `countsLoosely` (see {@link RedisLink.script}; needs
 * {@link USABLE_COUNT}): where the script's last three ARGV are `L`, the beat's key and its loose
 * mark's, counts the beat up loosely as {@link EPOCH_BEAT}'s `L` does, in the write's own script:
 * Redis replicates the two together, so a failover loses both or neither. A missing beat is made
 * (1), as EPOCH_BEAT's INCR makes it; one of no use is left as it is (the watch says so). A script
 * that refuses returns before it: a refused write counts nothing.
 * @note Left alone while missing, a Redis written only by flagged sandboxes since its token was
 * made held no beat at all: a sandbox without the flag that had only read took a restore from an
 * older snapshot for nothing, and handed out again every id the flagged ones had answered 201
 * (attack43 F1: 348 of 348).
 * @note Sent ahead of the write, a count before a create then refused past the category limit
 * (nothing written), lost alone in a failover, was taken by the sandboxes without the flag for
 * Redis gone back in time: every request refused until restarted (attack35 F4).
 */
export const COUNT_LOOSELY = `if ARGV[#ARGV - 2] == 'L' then
  local beat = redis.pcall('GET', ARGV[#ARGV - 1])
  if beat == false or (type(beat) == 'string' and usable_beat(beat)) then
    redis.call('SET', ARGV[#ARGV], string.format('%d', redis.call('INCR', ARGV[#ARGV - 1])))
  end
end`

/** What a script sent with `countsLoosely` is given last when it is not to count (see {@link COUNT_LOOSELY}). */
const NOT_COUNTING = ['-', '', ''] as const

/** {@link EPOCH_BEAT}'s answer: the beat, and the last counted loosely (0 for none). */
function beatsOf(reply: Reply): [beat: number, loose: number] {
  const [beat, loose] = Array.isArray(reply) ? reply : []
  if (!usableBeatText(beat) || !usableBeatText(loose)) throw new StorageUnavailableError(`the epoch beat's script answered ${JSON.stringify(reply)}, not two beats`)
  return [Number(beat), Number(loose)]
}

/**
 * An error a command raised inside a script as it ran (Redis 7 says where: `script: <sha>, on
 * @user_script:<line>`), not a refusal before it ran: what the script wrote before it stays.
 */
const SCRIPT_RUNTIME_ERROR = /@user_script:\d+/
/** How often (ms) keys of the wrong type are said at most. */
const WRONG_TYPE_SAID_MS = 60_000

/** A master's replicas: as many online as expected, at least one; fewer online than expected; none, and none expected. */
type ReplicaState = 'online' | 'expected' | 'none'

/**
 * The replica links `INFO replication` lists that count: online, and not on port 0 (`redis-cli
 * --rdb` and `--replica` sync as replicas and never acknowledge: attack19 L1), each with the
 * replication offset it acknowledged and how long ago (`lag`, seconds). Every link counts, two at
 * one `ip:port` too: replicas behind one NAT gateway are listed at one address (attack22 S1: one
 * confirmed for both while the other was partitioned, 10 creates 201 lost).
 */
function countedReplicas(info: string): { readonly offset: number; readonly lag: number }[] {
  return listedLinks(info).filter((link) => link.counted)
}

/**
 * A replica link `INFO replication` lists: the address the master lists it at (`ip:port`: the
 * replica's address, or the one it announces, and its listening port: every link of one replica
 * has the same), the offset it acknowledged, how long ago (`lag`, seconds), and whether it counts
 * (see {@link countedReplicas}).
 */
export interface ListedLink {
  readonly address: string
  readonly offset: number
  readonly lag: number
  readonly counted: boolean
}

/**
 * The master (`host:port`) a Redis replicates, by its `INFO`, or undefined when it is a master: its first `role:` line,
 * as the scripts' guard reads it ({@link REPLICA_GUARD}).
 * @note Any line starting `role:slave`, a healthy master was taken for a replica, refused at start and every request
 * 503, for as long as a replica announcing an address holding a line break and `role:slave` was attached; and that
 * replica was never counted, so writes were answered without waiting for it (attack57 F2, F2b).
 */
export function replicaOfInfo(info: string): string | undefined {
  if (/^role:(\w+)/m.exec(info)?.[1] !== 'slave') return undefined
  return `${/^master_host:(\S+)/m.exec(info)?.[1] ?? '?'}:${/^master_port:(\d+)/m.exec(info)?.[1] ?? '?'}`
}

/**
 * Every replica link `INFO replication` lists, in its order (a link is added at the end as it asks
 * for a sync), and whether it counts (see {@link countedReplicas}).
 * @note Redis 7 lists a link that acknowledged within the current second with `lag=-1` (its
 * acknowledgement time is read from a fresher clock than the second it subtracts it from): such a
 * link was not counted, and a healthy master's writes were unknown for that count's second (14% of
 * creates on one with a replica; attack28 F8).
 */
export function listedLinks(info: string): ListedLink[] {
  return [...info.matchAll(/^slave\d+:ip=([^,]*),port=(\d+),state=(\w+),offset=(\d+)(?:,lag=(-?\d+))?/gm)].map(([, ip, port, state, offset, lag]) => ({
    address: `${ip}:${port}`,
    offset: Number(offset),
    lag: lag === undefined ? Number.POSITIVE_INFINITY : Math.max(0, Number(lag)),
    counted: state === 'online' && port !== '0' && lag !== undefined,
  }))
}

/**
 * A replica link that acknowledged within this many seconds (`lag` in `INFO replication`; replicas
 * acknowledge every second) raises the count of replicas expected; one silent longer is still
 * waited for while listed (it may be a replica partitioned), but never raises it.
 * @note A link left half-open (a replica rebooted, or replaced at another address, while its old
 * link lived on until `repl-timeout`) was counted beside the new one: two expected for good, every
 * write 503 though the one replica confirmed (attack21 F6, F8).
 */
export const FRESH_LAG_SECONDS = 2

/**
 * How long (ms) a replica's address must have been listed with no new link at it before its links
 * raise the count expected above one: longer than a link stays fresh once silent
 * ({@link FRESH_LAG_SECONDS}; `lag` is in whole seconds), with a second to spare, so that a replica
 * that reconnected is never two fresh links counted at once: its old link stopped acknowledging
 * before its new one was added, and is stale before the address is steady again.
 */
export const SETTLED_LINK_MS = (FRESH_LAG_SECONDS + 2) * 1000

/**
 * What a master's counts keep between them to tell its replicas apart: the addresses `INFO`
 * listed at the last count, in its order, and since when each has been listed with no link added
 * at it (monotonic ms).
 */
export interface ReplicaAddresses {
  listed: readonly string[]
  readonly steadySince: Map<string, number>
}

/** A master's {@link ReplicaAddresses} before its first count (or once its replication history changed). */
export function noReplicaAddresses(): ReplicaAddresses {
  return { listed: [], steadySince: new Map() }
}

/**
 * The count expected once a count at `now` lists `links` (in `INFO`'s order), `expected` before:
 * one fresh link (acknowledged within {@link FRESH_LAG_SECONDS}) raises it to one at once; more,
 * only to as many addresses as have a link that acknowledged (`offset` above 0) and is fresh now,
 * each listed {@link SETTLED_LINK_MS} or more with no link added at it since (`seen`, kept
 * between counts). An address is one replica: links at one address cannot be told apart (a link
 * that left and one added between two counts look like the same two), and one replica's flapping
 * links counted two (attack29 F1). Never lowered.
 * A link added at an address is one `INFO` lists past those the last count listed, in order (a
 * link is added at the end; one removed takes its place in no other link's order), so one that
 * came back at an address whose old link left between two counts is new all the same.
 * @note Counting links held 3 s defeated one reconnection only: a replica reconnecting every 1.5 s
 * (its old links half-open until `repl-timeout`) was always two fresh links, and raised the count
 * to 3 for good with one replica: every write 503 (attack25 R1). Links told apart by client id
 * (`CLIENT LIST`) were matched to `INFO`'s by rank, but the ids count up by connection and `INFO`
 * lists links as they ask for a sync: a link connected early and synced late (a proxy's
 * connection opened in advance) lent its freshness to another, and two replicas were counted 3
 * (attack28 F4). Addresses need no match.
 * The cost: replicas listed at one address (behind one NAT gateway, announcing no address of their
 * own) are expected as one (every one online is still waited for; `--redis-replicas` declares them).
 */
export function settledExpectation(expected: number, links: readonly ListedLink[], seen: ReplicaAddresses, now: number): number {
  const listed = links.map((link) => link.address)
  // The links this count lists in the last one's order; those past them were added since.
  let matched = 0
  for (const address of seen.listed) if (matched < listed.length && address === listed[matched]) matched++
  const added = new Set(listed.slice(matched))
  for (const address of seen.steadySince.keys()) if (!listed.includes(address)) seen.steadySince.delete(address)
  for (const address of listed) if (added.has(address) || !seen.steadySince.has(address)) seen.steadySince.set(address, now)
  seen.listed = listed
  const fresh = links.filter((link) => link.counted && link.lag <= FRESH_LAG_SECONDS)
  const settled = new Set(fresh.filter((link) => link.offset > 0 && now - seen.steadySince.get(link.address)! >= SETTLED_LINK_MS).map((link) => link.address)).size
  return Math.max(expected, Math.min(fresh.length, 1), settled)
}

/**
 * Lua: the most replicas of a replication history (ARGV[1], its `master_replid`) seen online at
 * once by any process, raised to ARGV[2] (what this process expects); allowed when Redis is full.
 * The hash KEYS[1] holds history → count, and `last` → the count of the history last written.
 * A history met for the first time starts from the one before it: one fewer than the history it
 * was a replica in (ARGV[3], its `master_replid2`: a promotion, the promoted replica no longer one
 * of them), or, after none (a master restarted: a new history with its data), the last one's.
 * @note A new history started at 0: a replica promoted while its sibling still followed the dead
 * master, or a master restarted from its AOF while its replica resynced, answered 201 with no
 * copy anywhere (attack21 F3, F4).
 */
const REPLICAS_EXPECTED = redisScript(`#!lua flags=allow-oom
local most = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1')
if most < 0 then
  local before = ARGV[3] ~= '' and tonumber(redis.call('HGET', KEYS[1], ARGV[3]) or '-1') or -1
  if before >= 0 then most = math.max(before - 1, 0) else most = tonumber(redis.call('HGET', KEYS[1], 'last') or '0') end
end
most = math.max(most, tonumber(ARGV[2]))
-- Never made for a Redis that never had a replica; kept exact once it is.
if most > 0 or redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], most, 'last', most) end
return most`)

/** A connection to Redis or a cluster: commands and scripts, failures as {@link StorageUnavailableError}. */
/** A reply, for a message: its type and the start of its text. */
function describeReply(reply: unknown): string {
  const text = JSON.stringify(reply) ?? String(reply)
  return `${Array.isArray(reply) ? 'an array' : typeof reply} ${text.length > 60 ? `${text.slice(0, 60)}…` : text}`
}

export class RedisLink {
  readonly target: RedisTarget
  /** The key health and the start probe writes on (see {@link RedisLinkOptions.probeKey}). */
  readonly probeKey: string
  /** See {@link RedisLinkOptions.replicasKey}. */
  readonly replicasKey: string
  /** See {@link RedisLinkOptions.epochKey}. */
  readonly epochKey: string | undefined
  /** See {@link RedisLinkOptions.beatKey}. */
  readonly beatKey: string | undefined
  /** The last beat counted loosely (see {@link EPOCH_BEAT}), in the beat's slot; undefined when none can be (a `}` in a key of no hash tag, on a Cluster). */
  readonly looseKey: string | undefined
  /** The token this process found in {@link epochKey} (or wrote there, the first), once read. */
  #epoch: string | undefined
  /** The highest beat of the epoch this process counted and its replicas confirmed (see {@link watchEpoch}). */
  #beat = 0
  /** The highest beat counted loosely that this process read, above {@link #beat}: one it could not see confirmed (see {@link watchEpoch}). */
  #looseSeen = 0
  /** The beat's confirmation under way, one at a time (see #readEpochNow). */
  #beatConfirming: Promise<void> | undefined
  /** @internal Whether this process took its storage for lost (every command refused until restarted). */
  get lostStorage(): boolean {
    return this.#lost !== undefined
  }

  /** Whether the token was found of another type (by hand) while none was taken: one written afterwards by this process follows a loss, if it wrote meanwhile. */
  #tokenUnusable = false
  /** See {@link RedisLinkOptions.onEpoch}. */
  readonly #onEpoch: ((epoch: RedisEpoch) => void) | undefined
  /** Whether {@link #onEpoch} was told storage is lost (or it was handed so). */
  #lostTold = false
  /** The epoch last told to {@link #onEpoch}. */
  #epochTold: RedisEpoch | undefined
  /** When (monotonic ms) this process last counted the beat loosely (see #countLoosely). */
  #looselyAt = Number.NEGATIVE_INFINITY
  /** The epoch read in flight: one at a time (a beat confirmed late is older than one confirmed since). */
  #epochReading: Promise<void> | undefined
  /** How many writes this process had answered as applied (see {@link script}), and how many when its last beat was confirmed. */
  #writesApplied = 0
  #writesBeaten = 0
  /** Why Redis no longer holds the sandbox's keys (the token gone or another), once seen: every command refused then. */
  #lost: string | undefined
  #epochTimer: NodeJS.Timeout | undefined
  readonly #open: () => Connection
  readonly #warn: (message: string) => void
  /** The keys that stand behind every write (see {@link aclKeysChecked}). */
  readonly #watchPairs: readonly (readonly [command: string, key?: string])[]
  /** The commands the watch runs on its keys (see #watchPairs): asked there, not on a write's or the probe's key. */
  readonly #watchCommands: ReadonlySet<string>
  /**
   * The keys every write shares (the registry, the budget's counts...) with what the sandbox runs on them, for the write
   * probe (RedisLinkOptions.probeAlso).
   * @note Not asked, a key pattern leaving out the budget's `usage` hash refused every create while health said 200
   * (attack63 F3), and one refusing the sweep's HSCAN kept expired tenants' bytes counted for good (attack63 F2).
   */
  readonly #sharedPairs: readonly (readonly [command: string, key?: string])[]
  /** Each write script with its ACL checks first (see #writeChecked), once made. */
  readonly #checkedScripts = new WeakMap<RedisScript, RedisScript>()
  /** Each script that writes, not answered as applied, with its own ACL checks first (see #writeChecked), once made. */
  readonly #bookkeepingScripts = new WeakMap<RedisScript, RedisScript>()
  /** The write probe (see #writeProbe), and how many commands the scripts called when it was made. */
  #probe: { readonly script: RedisScript; readonly commands: number } | undefined
  readonly #renewAfterMs: number | undefined
  /** Which failures count towards a renewal: any, or only commands sent and never answered. */
  readonly #renewOn: 'any' | 'unanswered'
  readonly #commandTimeoutMs: number
  readonly #allowEviction: boolean
  readonly #allowFailoverLoss: boolean
  /** See {@link RedisLinkOptions.replicas}. */
  readonly #replicasDeclared: number | undefined
  /** The writes waiting for a replica's confirmation, by master (see {@link ReplicaConfirmation}). */
  readonly #confirmations = new Map<string, ReplicaConfirmation>()
  /** The client the confirmations' rounds go on (never adopted: its failures are its own), opened on first need. */
  #waiter: { readonly connection: Connection; readonly ready: Promise<void> } | undefined
  #connection: Connection
  /** A fresh client connecting, adopted once connected (see {@link #renew}). */
  #renewing: Connection | undefined
  /** Settles once {@link close} has closed the clients. */
  #closing: Promise<void> | undefined
  #closed = false
  /** Why the replicas every process expects cannot be read (`<prefix>replicas` of the wrong type), or undefined. */
  #countUnreadable: string | undefined
  /** When a key of the wrong type was last said (see {@link #failure}). */
  #wrongTypeSaidAt = Number.NEGATIVE_INFINITY
  /** Each server's state, by address (`''` first: the one Redis, or the cluster client as a whole). */
  readonly #servers = new Map<string, Server>()
  #renewedAt = Number.NEGATIVE_INFINITY
  /**
   * Whether commands read policies (see {@link #policyRead}): from the start's read of every
   * server's ({@link checkEviction}) on, or from a start that serves while Redis is unreachable.
   */
  #policiesRead = false
  /** When Redis last refused the scripts' replica guard its `INFO` (monotonic ms): scripts go without it for {@link GUARD_RETRY_MS}. */
  #guardDeniedAt = Number.NEGATIVE_INFINITY
  /** Redis's clock less this process's monotonic clock (ms), at most, and when that reading came: see {@link redisNow}. */
  #clock: { offset: number; at: number } | undefined
  /** When Redis's clock was last read (monotonic ms). */
  #clockReadAt = Number.NEGATIVE_INFINITY
  /** On a cluster: the clock of the master holding each hash tag (`{tenant}`) written lately, read through that tag's slot (see {@link redisNow}). */
  readonly #tagClocks = new Map<string, { offset: number; at: number; server: string | undefined }>()
  /** The reading of Redis's clock in flight, shared. */
  #clockReading: Promise<void> | undefined
  /** The next reading replaces the one kept, tighter or not ({@link readClockAgain}). */
  #replaceClock = false
  /** On a cluster, each master's clock as last read (its offset, as in {@link #tagClocks}), for {@link #noteMasterClock}. */
  readonly #masterClocks = new Map<string, number>()
  /** Whether the operator was told the masters' clocks differ (said again once they agree). */
  #skewSaid = false

  constructor(
    target: RedisTarget,
    open: () => Connection,
    warn: (message: string) => void,
    options: {
      probeAlso?: readonly (readonly [command: string, key?: string])[] | undefined
      renewAfterMs?: number | undefined
      renewOn?: 'any' | 'unanswered' | undefined
      commandTimeoutMs?: number | undefined
      allowEviction?: boolean | undefined
      allowFailoverLoss?: boolean | undefined
      replicas?: number | undefined
      probeKey?: string | undefined
      replicasKey?: string | undefined
      epochKey?: string | undefined
      beatKey?: string | undefined
      epoch?: RedisEpoch | undefined
      onEpoch?: ((epoch: RedisEpoch) => void) | undefined
    } = {},
  ) {
    this.target = target
    this.epochKey = options.epochKey
    this.beatKey = options.epochKey === undefined ? undefined : (options.beatKey ?? beatKeyOf(options.epochKey, target.mode === 'cluster'))
    this.looseKey = this.beatKey === undefined ? undefined : slotFellow(this.beatKey, ':loose')
    // @note Each with the command the watch runs on it: asked with the write's own first key, a selector allowing the
    // beat's INCR on tenants' keys only passed, and creates were 201 while the beat stood still (attack63 F4).
    const watched = (command: string, key: string | undefined) => (key === undefined ? [] : [[command, key] as const])
    this.#sharedPairs = options.probeAlso ?? []
    this.#watchPairs = [
      ...watched('GET', this.epochKey),
      ...watched('SET', this.epochKey),
      ...watched('GET', this.beatKey),
      ...watched('INCR', this.beatKey),
      ...watched('GET', this.looseKey),
      ...watched('SET', this.looseKey),
      ...watched('SET', this.beatKey === undefined ? undefined : markKeyOf(this.beatKey)),
      ['TIME'] as const,
    ]
    this.#watchCommands = new Set(this.#watchPairs.filter((pair) => pair[1] !== undefined).map(([command]) => command))
    this.probeKey = options.probeKey ?? 'petstore-sandbox:write-probe'
    this.replicasKey = options.replicasKey ?? 'petstore-sandbox:replicas'
    this.#allowEviction = options.allowEviction ?? false
    this.#allowFailoverLoss = options.allowFailoverLoss ?? false
    this.#replicasDeclared = options.replicas
    if (options.epoch !== undefined && this.epochKey !== undefined) {
      this.#epoch = options.epoch.token
      this.#beat = options.epoch.beat
      // @note Lost before this process started, for the process it replaces: lost for it too. Started without it, a worker
      // replacing one that had found keys evicted (every worker refusing) counted the evictions from its own first read
      // and served the evicted state, ids handed out again (attack49 F1).
      if (options.epoch.lost !== undefined) {
        this.#lost = options.epoch.lost
        this.#lostTold = true
        warn(`storage lost: ${this.#lost}`)
      }
    }
    this.#onEpoch = options.onEpoch
    this.#open = open
    this.#warn = warn
    this.#renewAfterMs = options.renewAfterMs
    this.#renewOn = options.renewOn ?? 'any'
    this.#commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS
    // The start reads every server's policy right after connecting (connectRedis).
    const whole = this.#server('')
    whole.checkDue = false
    whole.checkedAt = monotonicNow()
    this.#connection = open()
    this.#connection.adopt()
  }

  /** How long one command may wait for its answer (ms). */
  get commandTimeoutMs(): number {
    return this.#commandTimeoutMs
  }

  /** Settles once the first client is connected. */
  get connecting(): Promise<void> {
    return this.#connection.connecting
  }

  get cluster(): boolean {
    return this.target.mode === 'cluster'
  }

  /**
   * Runs one command; `firstKey` routes it to its slot's master in a cluster. `own`: a check of the sandbox's own (not
   * a request's need), whose ACL refusal is thrown as Redis replied it, nothing noted.
   */
  async call(firstKey: string | undefined, args: string[], options: { readonly own?: boolean } = {}): Promise<Reply> {
    if (this.#lost !== undefined) throw new StorageUnavailableError(this.#lost, { until: 'restart' })
    const server = this.#serverFor(firstKey)
    let reply: Reply
    try {
      await this.#policyRead(server)
      await this.#epochCheck(server)
      // The policy read may have found keys evicted (attack41 F1): the catch below says so.
      if (this.#lost !== undefined) throw new Error(this.#lost)
      reply = await this.#connection.send(firstKey, args, this.#timeLeft())
    } catch (error) {
      if (this.#lost !== undefined) throw new StorageUnavailableError(this.#lost, { until: 'restart' })
      if (aclRefusal(error)) throw options.own === true ? error : this.#denied(server, messageOf(error), error)
      if (firstKey !== undefined && error instanceof ErrorReplied && WRITE_REFUSAL.test(messageOf(error))) throw this.#refused(server, firstKey, error)
      throw this.#failure(error, server)
    }
    this.recovered(server)
    return reply
  }

  /**
   * A write Redis refused while answering: a {@link StorageUnavailableError} (503, not applied),
   * said once in the log; health is degraded until a write to that server succeeds or health's
   * probe does ({@link ping}). The server is not marked failing: its reads are served.
   * @note It was marked failing and the next answer "recovered" it: a pair of log lines a request,
   * and health 200 while every write was refused (attack17 C1, issue 20 F09's Redis twin).
   */
  #refused(server: Server, key: string, error: unknown): StorageUnavailableError {
    const detail = `${this.#display(server)} refuses writes: ${messageOf(error)}`
    const now = monotonicNow()
    // @note Said at most once in BEHIND_HOLD_MS: on a full Redis writes that free memory pass, and
    // the log said refusing/accepting once a pair of requests (attack19 R2).
    let said = server.refusing?.said ?? false
    if (server.refusing === undefined && now - server.refusalSaidAt >= BEHIND_HOLD_MS) {
      this.#warn(`storage refusing: ${detail}; answering 503 storage_unavailable to writes ${server.address === '' ? '' : "of that master's tenants "}until it accepts them (health degraded)`)
      server.refusalSaidAt = now
      said = true
    }
    server.refusing = { detail, key, said }
    // @note A master demoted to a replica behind an address that moved (DNS, a proxy keeping old
    // connections): the connection stays on it (attack19 R3, open). Renewing the client on every
    // refusal past 5 s opened 13,812 connections in 10 s (attack20 R5), and was taken out.
    return new StorageUnavailableError(detail, { cause: error })
  }

  /**
   * `script` with the ACL checks first (see {@link aclChecked}, {@link aclKeysChecked}): of the commands it calls, the
   * beat's and the epoch check's (a write whose beat cannot be counted is one a Redis restored from a snapshot taken
   * since would lose unseen: attack61 F4, `-incr`, creates 201 while the beat stood still, then ids handed out again),
   * and of the keys that stand behind every write (`answered`: a write answered as applied; the journal's, the
   * registry's bookkeeping and a planned answer's take ask their own commands only).
   * @note The watch's pairs asked by every script that writes, a read paid about 60 checks (review51 F4).
   */
  #writeChecked(script: RedisScript, answered: boolean): RedisScript {
    const made = answered ? this.#checkedScripts : this.#bookkeepingScripts
    let checked = made.get(script)
    if (checked === undefined) {
      checked = redisScript(aclChecked(script.source, answered ? this.#watchCommands : undefined) + (answered ? aclKeysChecked(this.#watchPairs) : '') + script.source)
      made.set(script, checked)
    }
    return checked
  }

  /**
   * Lua: a write Redis checks as any (scripting allowed, memory left under noeviction, a master, write rights on the
   * key) that changes nothing (`SET … XX` on a key that is never made), refused first where the ACL would refuse any
   * command the sandbox's scripts call (alone), a write to the probe's key, one the watch runs on its keys, a key that
   * stands behind every write, or the replicas' count (see {@link aclChecked}). Made on first use (every script made by
   * then), again if more were made since.
   * @note A selector allowing a command on some keys only is asked by each write on the keys it runs it on, not here: a
   * tenant's keys, or a shared key's command other than a write (the sweep's `DEL` of a plan), refused by one answers
   * 503 to the requests that need it (said), health ok.
   * @note Only the SET was asked: with `-pexpire` (every create refused) health answered 200 between requests (review49 F2).
   */
  #writeProbe(): RedisScript {
    if (this.#probe?.commands !== scriptCommands.size) {
      // @note The watch's commands on the watch's keys only: asked on the probe's key too, the beat's INCR refused the
      // start of a user allowed it on the beat only, all the sandbox runs it on (`-incr (+incr ~…epoch:beat)`: review51 F1).
      const commands = [...scriptCommands].sort().filter((command) => !this.#watchCommands.has(command)).map((command) => [command, this.probeKey] as const)
      const pairs = [...commands, ['SET', this.probeKey] as const, ...this.#watchPairs, ...this.#sharedPairs, ...(this.cluster ? [] : [['SET', this.replicasKey] as const])]
      this.#probe = { script: redisScript(aclKeysChecked(pairs) + `return redis.call('SET', KEYS[1], '1', 'XX', 'PX', '1000')`), commands: scriptCommands.size }
    }
    return this.#probe.script
  }

  /**
   * A command or key Redis refused the sandbox's user (its ACL: `NOPERM`, or the words of Redis 7.0 and 7.2 inside a
   * script): a {@link StorageUnavailableError} (503, not run), said once, and again when the refusal changes (another
   * command or key kind) at most every {@link BEHIND_HOLD_MS}; health is degraded until its write probe (which asks the
   * ACL for every command the scripts call: RedisLink's #writeProbe) passes, or, on a cluster, none was met for
   * {@link DENIED_HOLD_MS}. Redis answers: it is not marked failing, nor its policy or epoch read again.
   * @note Taken for a failure, each refusal said "storage failing" and the next command "storage recovered", about once
   * a second, while every request was refused (attack60 F4); a refused PING, health's own probe, made health 503 while
   * every create was 201 (attack60 F3). Forgotten 3 s after the last one met, "storage refused" and "storage allowed"
   * were said at every request farther apart, the ACL unchanged, and health 200 between them (review49 F2).
   */
  #denied(server: Server, message: string, cause?: unknown): StorageUnavailableError {
    const detail = `${this.#display(server)} refuses the sandbox's user: ${message}`
    const at = monotonicNow()
    // @note Redis 7.0's words inside a script name no command: met beside a named refusal (the writes' own check), they
    // read as another refusal, and one rule was said again every 10 s (review50 F3). While one is held, it is that one.
    const named = deniedKind(message)
    const kind = server.denied !== undefined && !/^[A-Z]+$|^keys$/.test(named) ? server.deniedSaid : named
    // @note The same one held unsaid (met again within 10 s of the last line, after "allowed") is said once the 10 s are
    // over: said only while none was held, the log's last word stayed "storage allowed" while every create was 503 (review51 F3).
    if (kind !== server.deniedSaid ? at - server.deniedSaidAt >= BEHIND_HOLD_MS || server.denied === undefined : (server.denied === undefined || !server.deniedTold) && at - server.deniedSaidAt >= BEHIND_HOLD_MS) {
      this.#warn(`storage refused: ${detail}; answering 503 storage_unavailable to the requests that need it until its ACL allows them`)
      server.deniedSaid = kind
      server.deniedSaidAt = at
      server.deniedTold = true
    }
    server.denied = { detail, at }
    // @note The reads each second may be refused too (the beat is a script, the token a GET): the epoch is checked before
    // the next command, so that a Redis restored in place meanwhile is refused from the first command once the ACL
    // allows it again, not served until the next read (review49 F4: ids 9-11 handed out again).
    server.epochDue = true
    return new StorageUnavailableError(detail, cause === undefined ? {} : { cause })
  }

  /** @internal A replacement worker's start met writes refused by the ACL (see connectRedis): noted and said as a running one would. */
  deniedAtStart(message: string): void {
    this.#denied(this.#server(''), message)
  }

  /**
   * `server`'s ACL refusal is over (its write probe passed): forgotten, said, and the epoch checked before the next
   * command (a Redis restored in place while the reads each second were refused is refused from its first command:
   * review49 F4, as after a policy refusal, attack46 F1).
   */
  #allowed(server: Server): void {
    const denied = server.denied
    if (denied === undefined) return
    server.denied = undefined
    server.epochDue = true
    // @note Said only after a "refused" line, once: a refusal the probe cannot see (one tenant's keys) was "allowed" at
    // every refused request (review50 F1, attack63 F3).
    if (!server.deniedTold) return
    server.deniedTold = false
    this.#warn(`storage allowed: ${this.#display(server)}: its write probe passes again (the last refusal: ${denied.detail.slice(denied.detail.indexOf(': ') + 2)})`)
  }

  /**
   * While `server` (the one Redis) is refused by its ACL and a command to it passed: its write probe, in the background,
   * at most once every {@link DENIED_HOLD_MS}, so that "storage allowed" is said without a health probe.
   */
  #probeDenied(server: Server): void {
    if (this.cluster || server.denied === undefined || this.#closed || monotonicNow() - server.deniedProbedAt < DENIED_HOLD_MS) return
    server.deniedProbedAt = monotonicNow()
    requestDeadline
      .exit(() => this.script(this.#writeProbe(), [this.probeKey], []))
      .then(
        () => this.#allowed(server),
        () => undefined,
      )
  }

  /** A write to `server` succeeded: it accepts writes again, if it refused them. */
  #accepted(server: Server): void {
    const refusing = server.refusing
    if (refusing === undefined) return
    server.refusing = undefined
    if (!refusing.said) return
    this.#warn(`storage accepting: ${this.#display(server)} accepts writes again`)
  }

  /**
   * Runs a Lua script on `keys` (all of one tenant: one slot). An error the script raised on
   * purpose comes back as a {@link RedisScriptRefusal} carrying its message. With `confirm` (a write
   * answered as applied), where its master has replicas online, resolves once every one of them has it,
   * and throws a {@link WriteOutcomeUnknownError} when none confirms within the request's time
   * (applied on the master; a failover now would lose it), unless `allowFailoverLoss`.
   * @note Redis copies writes to replicas after answering them: a failover to a replica 1.5 s
   * behind lost 507 creates answered 201 and handed their ids out again (attack15 F1).
   */
  async script(script: RedisScript, keys: readonly string[], args: readonly (string | number)[], options: { readonly confirm?: boolean; readonly quiet?: boolean; readonly countsLoosely?: boolean } = {}): Promise<Reply> {
    if (this.#lost !== undefined) throw new StorageUnavailableError(this.#lost, { until: 'restart' })
    const server = this.#serverFor(keys[0])
    try {
      await this.#policyRead(server)
      await this.#epochCheck(server)
      // The policy read may have found keys evicted (attack41 F1): the catch below says so.
      if (this.#lost !== undefined) throw new Error(this.#lost)
    } catch (error) {
      if (this.#lost !== undefined) throw new StorageUnavailableError(this.#lost, { until: 'restart' })
      // Not sent: a plain failure, never an unknown outcome.
      throw this.#failure(error, server)
    }
    // @note No write before the token of the sandbox's keys is held: a sandbox started while its user could not read it
    // (GET refused), or while Redis was down, answered 201s no watch stood behind, and a Redis restored from a snapshot
    // taken meanwhile handed their ids out again, never noticed (attack61 F7).
    // A token of no use (another type of value, by hand) is served beside, as documented: health says so (attack39 F4).
    if (options.confirm === true && script !== EPOCH_BEAT && this.epochKey !== undefined && this.#epoch === undefined && !this.#tokenUnusable) {
      await this.#readEpoch()
      if (this.#epoch === undefined && this.#lost === undefined && !this.#tokenUnusable) throw new StorageUnavailableError(`${this.#display(server)}: the token of the sandbox's keys (${this.epochKey}) could not be read yet, and writes wait for it (what stands behind them: the watch for Redis losing its keys)`)
    }
    const evicting = this.#evictingFor(server)
    if (evicting !== undefined) {
      // @note Redis answered the policy read since it last failed (else #policyRead throws): say
      // so, still refused, even when every command a request sends is a script (issue 21's
      // scenario read is one), as a plain command answered would.
      this.recovered(server)
      throw new StorageUnavailableError(`${this.#display(server)}: ${evicting}`)
    }
    // The replication history the write goes into, known before it is sent (see #confirmed).
    const confirming = options.confirm === true && !this.#allowFailoverLoss
    // Counted before the write when the count is a second old (as it would be after it): a
    // history read long before would be taken for a failover under the write.
    if (confirming) await this.#replicaState(server).catch(() => undefined)
    const history = server.replid
    const connection = this.#connection
    const looselyAt = this.#looselyAt
    const counting = options.confirm === true && script !== EPOCH_BEAT ? this.#countLoosely(keys[0], options.countsLoosely === true) : undefined
    const tail = [String(keys.length), ...keys, ...args.map(String), ...(options.countsLoosely === true ? (counting ?? NOT_COUNTING) : [])]
    // A write refused by the ACL before it writes anything (see WRITE_ALLOWED).
    // @note Every script that writes, not only those answered as applied: a planned answer's take stopped part way used the
    // plan up, answered 503 storage_unavailable (review50 F2).
    // The write probe asks for itself (review51 N1: checked twice).
    const checked = writes(script) && script !== this.#probe?.script ? this.#writeChecked(script, options.confirm === true) : script
    const evaluate = async (sent: RedisScript): Promise<Reply> => {
      try {
        return await connection.send(keys[0], ['EVALSHA', sent.sha, ...tail], this.#timeLeft())
      } catch (error) {
        if (!messageOf(error).startsWith('NOSCRIPT')) throw error
        // Redis does not know the script yet (first use, or after a restart): send its text once.
        return await connection.send(keys[0], ['EVAL', sent.source, ...tail], this.#timeLeft())
      }
    }
    let reply: Reply
    try {
      // @note Guarded in the script itself: by the read of the replica's role each second alone, writes went on to a
      // master demoted to a writable replica for up to a second after a switchover (201s lost, their ids handed out
      // again, with --redis-allow-failover-loss), and for good with --redis-allow-eviction, which skips that read
      // (attack51 F1, F2).
      const guard = !this.cluster && monotonicNow() - this.#guardDeniedAt >= GUARD_RETRY_MS
      try {
        reply = await evaluate(guard ? guarded(checked) : checked)
        // Guarded again and let through: INFO is allowed again (with --redis-allow-eviction, nothing reads Redis each second).
        if (guard) this.#guardBack()
      } catch (error) {
        // A user not allowed INFO: refused before the script ran; sent again without the guard (the read each second,
        // by ROLE, finds a replica then).
        if (!guard || !(error instanceof ErrorReplied) || !guardRefused(messageOf(error))) throw error
        reply = await evaluate(checked)
        // @note Tried again later: left out for good, INFO allowed again did not bring the guard back (review44 F5).
        if (this.#guardDeniedAt === Number.NEGATIVE_INFINITY) {
          this.#warn(`storage: Redis refuses INFO to the sandbox's user (${messageOf(error)}): its scripts go without their check that Redis is not a replica, and ROLE is read each second instead, until INFO is allowed again`)
        }
        this.#guardDeniedAt = monotonicNow()
      }
    } catch (error) {
      const refusal = /^(?:ERR )?(?:Error running script.*?: )?(NOSEED|IDSPACE|LIMIT|VOID|LATE|BUDGET|KEPT|FULL|BOOK|RECOUNT|RESTART)\b/.exec(messageOf(error))
      if (refusal) {
        // Nothing written, nothing counted: the next write counts.
        if (counting !== undefined) this.#looselyAt = looselyAt
        throw new RedisScriptRefusal(refusal[1])
      }
      if (aclRefusal(error)) {
        // Refused by its own check, before it ran: nothing counted (review51 N2).
        if (counting !== undefined && messageOf(error).startsWith(OWN_CHECK_REFUSAL)) this.#looselyAt = looselyAt
        const denied = this.#denied(server, messageOf(error), error)
        // @note Redis checks a script's commands against the ACL as it runs them, and rolls back nothing: one refused
        // after the script wrote (`-pexpire`, `-@sortedset`) left the write applied, answered 503 storage_unavailable,
        // each retry of a create adding one more. Refused before it ran (EVALSHA, or its keys), nothing was written.
        if (options.confirm === true && IN_SCRIPT.test(messageOf(error))) throw new WriteOutcomeUnknownError(`${denied.message}; refused inside the script, the write may have been applied in part`, { why: 'partial' })
        throw denied
      }
      // Refused, not run (Redis checks before running a write): never an unknown outcome.
      if (error instanceof ErrorReplied && WRITE_REFUSAL.test(messageOf(error))) throw this.#refused(server, keys[0]!, error)
      const failure = this.#failure(error, server)
      // @note A script stopped by a key of the wrong type may have written before it (Redis rolls
      // nothing back): a write's outcome is unknown, never "not applied". Answered 503
      // storage_unavailable, each retry of a create added one more (attack24 R5-1).
      if (options.confirm === true && error instanceof ErrorReplied && !messageOf(error).startsWith(NOTHING_WRITTEN) && (WRONG_TYPE.test(messageOf(error)) || SCRIPT_RUNTIME_ERROR.test(messageOf(error)))) {
        throw new WriteOutcomeUnknownError(`${failure.message}; the write may have been applied in part`, { why: 'partial' })
      }
      // A reply from Redis (an error reply: LOADING, READONLY, …) or a refusal to send is an
      // outcome; only a script sent and never answered may have run unseen.
      if (error instanceof NotSent || error instanceof RequestTimeUp || error instanceof ErrorReplied) throw failure
      throw new RedisOutcomeUnknown(failure.message, { cause: error })
    }
    this.recovered(server)
    if (options.confirm) {
      this.#accepted(server)
      if (script !== EPOCH_BEAT) this.#writesApplied++
    }
    // @note The master asked after the reply: a write redirected (MOVED) went to its slot's new master.
    if (confirming) {
      const master = this.#serverFor(keys[0])
      // A write redirected (MOVED) went to another master: its history is that one's.
      if (master !== server && master.replicas === undefined) await this.#replicaState(master).catch(() => undefined)
      await this.#confirmed(master, keys[0]!, master === server ? history : master.replid, options.quiet === true)
    }
    return reply
  }

  /**
   * Whether writes to `key`'s master are answered as applied only once its replicas confirm them:
   * it has replicas online, or is expected to have some ({@link RedisLinkOptions.replicas}). Counted
   * again when the count is {@link REPLICAS_READ_MS} old (that write waits for the count: one a
   * second per master pays one more round trip).
   * @note A replica attached since the last count is not waited for until the next one.
   */
  async waitsForReplica(key: string): Promise<boolean> {
    if (this.#allowFailoverLoss) return false
    const server = this.#serverFor(key)
    // A command whose master is not known went through the cluster client as a whole: no master to count.
    if (this.cluster && server.address === '') return false
    return (await this.#replicaState(server)) !== 'none'
  }

  /**
   * A server's replicas, counted again when the count is {@link REPLICAS_READ_MS} old: fewer online
   * than expected is `expected` (a write is unknown at once: a failover to one missing would lose it).
   * @note Replicas are counted, not named: a replica announced under another address than its
   * master sees (`cluster-announce-ip`, NAT) was never online (attack20 K2), one replaced at another
   * address was missing for 5 minutes (attack20 A1), and one gone longer than 5 minutes was
   * forgotten, then promoted (attack20 S3: 4 of 4 creates answered 201 lost).
   */
  async #replicaState(server: Server, fresh = false): Promise<ReplicaState> {
    if (fresh || server.replicas === undefined || monotonicNow() - server.replicasReadAt >= REPLICAS_READ_MS) await this.#countReplicas(server).catch(() => undefined)
    const online = server.replicas ?? 0
    // @note One expected and not online makes writes unknown even while others confirm: another
    // online may be one never promoted (`cluster-replica-no-failover`: attack19 S2).
    if (online < this.#expected(server) || server.replicaFailing || server.replicasUncounted !== undefined || (this.#countUnreadable !== undefined && this.#replicasDeclared === undefined && !this.cluster)) return 'expected'
    return online > 0 ? 'online' : 'none'
  }

  /** How many replicas `server` is expected to have: declared, or as last counted. */
  #expected(server: Server): number {
    return this.#replicasDeclared ?? server.replicasExpected
  }

  /** @internal Why the one Redis refuses writes (its reply to RedisLink's #writeProbe), or undefined; nothing noted or logged. */
  async writesRefused(): Promise<string | undefined> {
    const tail = ['1', this.probeKey]
    try {
      try {
        await this.#connection.send(this.probeKey, ['EVALSHA', this.#writeProbe().sha, ...tail], this.#commandTimeoutMs)
      } catch (error) {
        if (!messageOf(error).startsWith('NOSCRIPT')) throw error
        await this.#connection.send(this.probeKey, ['EVAL', this.#writeProbe().source, ...tail], this.#commandTimeoutMs)
      }
      return undefined
    } catch (error) {
      return error instanceof ErrorReplied && WRITE_REFUSAL.test(messageOf(error)) ? messageOf(error) : undefined
    }
  }

  /**
   * The most replicas of the replication history `replid` seen online at once by any process on
   * this Redis, `known` (this process's expectation, its count now included) among them: kept in
   * `<prefix>replicas` (see REPLICAS_EXPECTED), read on a process's first count, when it sees more
   * online than it expected, and every {@link REPLICAS_SHARE_MS}; `known` when Redis cannot be asked
   * (full, failing). `previous`: the history before it (`master_replid2`), for a new one.
   * @note The count passed was what this process saw online, not what it expected: a hash deleted
   * came back lower than the replicas missing (attack21 F5).
   */
  async #sharedExpected(replid: string, previous: string | undefined, known: number): Promise<number> {
    try {
      const tail = ['1', this.replicasKey, replid, String(known), previous ?? '']
      let reply: Reply
      try {
        reply = await this.#connection.sendTo('', ['EVALSHA', REPLICAS_EXPECTED.sha, ...tail], this.#commandTimeoutMs)
      } catch (error) {
        if (!messageOf(error).startsWith('NOSCRIPT')) throw error
        reply = await this.#connection.sendTo('', ['EVAL', REPLICAS_EXPECTED.source, ...tail], this.#commandTimeoutMs)
      }
      this.#countUnreadable = undefined
      return Math.max(known, Number(reply) || 0)
    } catch (error) {
      // @note Of the wrong type (written by hand), the count every process shares was passed over
      // without a word, and a sandbox started after a replica left answered 201 without it
      // (attack24 R5-4): writes are unknown until it can be read.
      if (error instanceof ErrorReplied && WRONG_TYPE.test(messageOf(error))) {
        if (this.#countUnreadable === undefined) this.#warn(`storage replicas: ${this.replicasKey} holds the wrong type of value (written by hand?): the replicas every sandbox expects cannot be read, and ${REPLICAS_KEY_REMEDY}`)
        this.#countUnreadable = `${this.replicasKey} holds the wrong type of value, so the replicas expected cannot be read`
      }
      return known
    }
  }

  /**
   * How many replicas `CLUSTER NODES` lists for the master at `address` (as that master sees the
   * cluster), in any state and whether or not they may be promoted (every one is waited for), and
   * whether one is failing (`fail`, `fail?`), or undefined when it cannot be read. A node still in
   * its handshake is not one yet.
   */
  async #clusterReplicas(address: string): Promise<{ readonly count: number; readonly failing: boolean } | undefined> {
    let text: string
    try {
      text = String(await this.#connection.sendTo(address, ['CLUSTER', 'NODES'], this.#commandTimeoutMs))
    } catch {
      return undefined
    }
    const lines = text.trim().split('\n').map((line) => line.split(' '))
    const myself = lines.find((fields) => (fields[2] ?? '').split(',').includes('myself'))?.[0]
    if (myself === undefined) return undefined
    let count = 0
    let failing = false
    for (const [, , flags = '', master] of lines) {
      const flagList = flags.split(',')
      if (master !== myself || !(flagList.includes('slave') || flagList.includes('replica')) || flagList.includes('handshake')) continue
      count++
      if (flagList.includes('fail') || flagList.includes('fail?')) failing = true
    }
    return { count, failing }
  }

  /**
   * @internal The master (`host:port`) the one Redis replicates, or undefined when it is a master: by `INFO`, or by
   * `ROLE` where INFO is refused.
   * @note By INFO alone, a start on a writable replica as a user without INFO served, and answered its first creates 201
   * there until the first reading each second (attack57 F6).
   */
  async masterOf(): Promise<string | undefined> {
    try {
      return replicaOfInfo(String(await this.#connection.sendTo('', ['INFO', 'replication'], this.#commandTimeoutMs)))
    } catch (error) {
      if (!(error instanceof ErrorReplied)) throw error
      const role = (await this.#connection.sendTo('', ['ROLE'], this.#commandTimeoutMs)) as unknown[]
      return Array.isArray(role) && String(role[0]) === 'slave' ? `${String(role[1])}:${String(role[2])}` : undefined
    }
  }

  /**
   * @internal Why the replicas of some server cannot be counted or waited for (`INFO` or `WAIT`
   * refused), or undefined: asked of every server at start.
   * @note A user that may not run WAIT was accepted, then every write answered unknown for good,
   * the log blaming a replica (attack21 F7).
   */
  /**
   * @internal At start: why writes to a master would be answered write_outcome_unknown at once
   * (fewer of its replicas online than expected), or undefined.
   * @note Said only at the first write, a Redis that once had a replica made every sandbox
   * started later with the README's commands answer each write 503, health ok (trial38).
   */
  async replicasMissing(): Promise<string | undefined> {
    // @note Every master short of replicas, not the first alone (the review of trial38's warning, R10).
    const short: string[] = []
    for (const address of this.#connection.servers()) {
      const server = this.#server(address)
      await this.#replicaState(server, true)
      const expected = this.#expected(server)
      const online = server.replicas ?? 0
      if (online >= expected) continue
      const source = this.#replicasDeclared === undefined ? (this.cluster ? 'as the cluster lists them' : `the most seen online by a sandbox on it, kept in Redis${this.replicasKey === undefined ? '' : ` (${this.replicasKey})`}`) : 'as --redis-replicas says'
      const until = expected === 1 ? 'it is' : 'they are'
      // @note A replica syncing in full is not removed for good: no flag that would accept losses is suggested (attack28).
      const remedy =
        server.replicasSyncing > 0
          ? `${server.replicasSyncing === 1 ? 'a replica is' : `${server.replicasSyncing} replicas are`} still syncing in full: writes are confirmed once ${until} online`
          : `if one was removed for good, start every sandbox on it with --redis-replicas ${online}, or accept the loss with --redis-allow-failover-loss`
      short.push(`${this.#display(server)} is expected to have ${expected} ${expected === 1 ? 'replica' : 'replicas'} (${source}) and ${online} ${online === 1 ? 'is' : 'are'} online: its writes are answered 503 write_outcome_unknown (applied, unconfirmed) until ${until} back; ${remedy}`)
    }
    return short.length === 0 ? undefined : short.join('; ')
  }

  async replicasUncounted(): Promise<string | undefined> {
    for (const address of this.#connection.servers()) {
      for (const command of [['INFO', 'replication'], ['WAIT', '0', '1']]) {
        try {
          await this.#connection.sendTo(address, command, this.#commandTimeoutMs)
        } catch (error) {
          // A replica refuses WAIT too ("cannot be used with replica instances"): refused as one, below.
          // @note WAIT renamed away (a managed Redis may) too: passed, every write was answered write_outcome_unknown at
          // once, for good, the log blaming a replica that was online and caught up (attack57 F4).
          if (error instanceof ErrorReplied && (command[0] === 'INFO' || INFO_DENIED.test(messageOf(error)))) return messageOf(error)
        }
      }
    }
    return undefined
  }

  /**
   * Counts a server's replicas online (`INFO replication`: a replica still syncing confirms
   * nothing yet) and notes every replica listed.
   * @note Where INFO is not allowed (an ACL user without `@dangerous`), the confirmation was off
   * silently (attack18 F5): such a Redis is refused at start (unless `allowFailoverLoss`), and one
   * reconfigured since is said once.
   */
  #countReplicas(server: Server): Promise<void> {
    server.replicasReading ??= (async () => {
      try {
        let info: string
        try {
          info = String(await this.#connection.sendTo(server.address, ['INFO', 'replication'], this.#commandTimeoutMs))
        } catch (error) {
          if (!(error instanceof ErrorReplied)) throw error
          // Refused at start (connectRedis): only a Redis reconfigured since gets here.
          // @note Taken for no replica, writes were answered 201 without waiting for one attached since, and a failover to
          // it lost 2,534 of them, nothing said (attack54 F1): now unknown, as a replica expected and not online.
          const uncounted = `its replicas cannot be counted (INFO refused: ${messageOf(error)}; allow INFO for the sandbox's user)`
          if (server.replicasUncounted === undefined) {
            this.#warn(`storage replicas: ${this.#display(server)}: ${uncounted}: ${this.#allowFailoverLoss ? 'writes are answered without waiting for a replica (--redis-allow-failover-loss)' : 'writes are answered 503 write_outcome_unknown until it does'}`)
          }
          server.replicasUncounted = uncounted
          server.replicas = 0
          server.replicasReadAt = monotonicNow()
          return
        }
        const now = monotonicNow()
        server.replicasUncounted = undefined
        // @note A replica met at the server's address (a virtual IP or DNS name that moved for a
        // while, a master demoted): its links are its own chained replicas, and its history id its
        // master's; counted as the master's, two chained replicas raised the count every process
        // expects for good, every write unknown (attack30 F5). Its writes are refused (READONLY):
        // nothing is counted, the count as it was.
        if (replicaOfInfo(info) !== undefined) {
          server.replicasReadAt = now
          return
        }
        // @note Only replicas online, and never one on port 0: `redis-cli --rdb` (a backup) and
        // `--replica` sync as replicas, never acknowledge, and were expected for 5 minutes (attack19 L1).
        const links = listedLinks(info)
        const counted = links.filter((link) => link.counted)
        const online = counted.length
        const fresh = counted.filter((replica) => replica.lag <= FRESH_LAG_SECONDS).length
        // @note A new replication history (this address now a promoted replica): the replicas
        // expected were its old master's, itself among them (attack19 P1: 5 minutes of unknown writes).
        const replid = /^master_replid:(\S+)/m.exec(info)?.[1]
        const previous = /^master_replid2:(\S+)/m.exec(info)?.[1]
        const first = server.replicas === undefined || replid !== server.replid
        if (first) {
          server.replicasExpected = 0
          server.replicaAddresses = noReplicaAddresses()
        }
        server.replid = replid
        const raised = settledExpectation(server.replicasExpected, links, server.replicaAddresses, now)
        // A link not yet expected is counted again a second on, writes or not.
        if (fresh > raised) this.#recountAt(server, now + REPLICAS_READ_MS)
        if (this.cluster) {
          // @note On a Cluster, the replicas it lists, however long gone: one frozen past 5 minutes
          // was promoted when its master died (attack19 S1: 19,994 lost). Its configuration is
          // shared by every process already. One it says is failing is missing, whatever else is
          // online: a replica of the master outside the cluster stood in for it (attack21 C1).
          const listed = await this.#clusterReplicas(server.address)
          server.replicasExpected = listed === undefined ? Math.max(server.replicasExpected, fresh) : Math.max(fresh, listed.count)
          server.replicaFailing = listed?.failing ?? server.replicaFailing
        } else if (replid === undefined) {
          server.replicasExpected = raised
        } else if (first || raised > server.replicasExpected || monotonicNow() - server.replicasSharedAt >= REPLICAS_SHARE_MS || this.#countUnreadable !== undefined) {
          // @note Unreadable, it is read at each count (once a second): its deletion took up to
          // 30 s to be seen, every write unknown meanwhile (attack26 F2).
          // @note A process started after a replica dropped off never saw it, and answered 201
          // where the others answered unknown (trial5 P2): the most seen is kept in Redis, by
          // replication history, for every process (a count: no clock in it, attack20 C1).
          server.replicasSharedAt = monotonicNow()
          server.replicasExpected = await this.#sharedExpected(replid, previous, raised)
        }
        server.replicas = online
        server.replicasSyncing = links.filter((link) => !link.counted && !link.address.endsWith(':0')).length
        server.replicasReadAt = now
      } finally {
        server.replicasReading = undefined
      }
    })()
    return server.replicasReading
  }

  /**
   * Counts `server`'s replicas again at `at` (monotonic ms), outside any request, whether or not
   * its tenants write then: links pending are raised, or let go, on time.
   */
  #recountAt(server: Server, at: number): void {
    if (server.replicasRecount !== undefined || this.#closed) return
    server.replicasRecount = setTimeout(() => {
      server.replicasRecount = undefined
      if (!this.#closed) requestDeadline.exit(() => this.#countReplicas(server)).catch(() => undefined)
    }, Math.max(0, at - monotonicNow()) + 50)
    server.replicasRecount.unref()
  }

  /**
   * Waits until a replica of `server` has the writes answered so far, or throws a
   * {@link WriteOutcomeUnknownError} when none has by the request's deadline, or none is online
   * though one was lately. `quiet`: for no write of a tenant's (the beat of a sandbox that does
   * not write, read with a confirmation): not confirmed, nothing is said, and health is not
   * degraded by it.
   * @note The beat's confirmation said "answering 503 write_outcome_unknown to its writes" on a
   * sandbox that wrote nothing, and degraded its health: every sandbox on a Redis whose replica
   * stalled turned unhealthy at once, a load balancer left with none to serve reads (attack32 F2).
   */
  async #confirmed(server: Server, key: string, history: string | undefined, quiet = false): Promise<void> {
    if (this.#allowFailoverLoss || (this.cluster && server.address === '')) return
    const state = await this.#replicaState(server)
    // @note The master changed under the write (a replica promoted behind the same address): it
    // may have gone to the old one, which no replica of the new one has.
    if (history !== server.replid) {
      const detail = `${this.#display(server)}: its replication history changed while the write was under way (a failover), so the write may have gone to the master it replaced`
      if (!quiet) this.#warn(`storage replicas: ${detail}; answering 503 write_outcome_unknown to it`)
      throw new WriteOutcomeUnknownError(`${detail}; the write may be lost`)
    }
    if (state === 'none') return
    // Given up on early enough that the request's journal entry still has time.
    const now = monotonicNow()
    const deadline = this.requestDeadline()
    const until = deadline === undefined ? now + this.#commandTimeoutMs : deadline - Math.min(2 * REPLICA_WAIT_SLICE_MS, (deadline - now) / 2)
    if (state === 'online' && (await this.#confirmation(server).confirm(until, key, history))) {
      if (quiet) return
      if (server.behind !== undefined && monotonicNow() - server.behind.at >= BEHIND_HOLD_MS) {
        this.#warn(`storage replicas: ${this.#display(server)}: a replica confirms writes again`)
        server.behind = undefined
      }
      return
    }
    if (quiet) throw new WriteOutcomeUnknownError(`${this.#display(server)}: not confirmed by a replica`)
    // The state again (counted anew when a round ended unconfirmed): the reason said is the latest.
    const latest = state === 'online' ? await this.#replicaState(server) : state
    const expected = this.#expected(server)
    const online = server.replicas ?? 0
    const missing =
      online < expected
        ? // @note A replica still syncing in full (Redis 7 waits 5 s for more before a diskless one) was said to be removed for good, with a flag that would accept losses (attack28).
          `${online} of the ${expected} replicas expected ${online === 1 ? 'is' : 'are'} online, and a failover to one missing would lose the write (${server.replicasSyncing > 0 ? `${server.replicasSyncing === 1 ? 'a replica is' : `${server.replicasSyncing} replicas are`} still syncing in full: writes are confirmed once ${server.replicasSyncing === 1 ? 'it is' : 'they are'} online` : `if one was removed for good, start with --redis-replicas ${online}`})`
        : server.replicaFailing
          ? 'the cluster says a replica of it is failing, and a failover to that one would lose the write'
          : `${server.replicasUncounted ?? this.#countUnreadable ?? 'the replicas expected cannot be read'}, and a failover to one missing would lose the write`
    // @note WAIT refused to the sandbox's user was said as a replica behind or stopped, with a flag that accepts losses as
    // the way out (attack60 F1).
    const refused = latest === 'online' ? this.#confirmation(server).refused : undefined
    const detail = `${this.#display(server)}: ${refused !== undefined ? `its replicas cannot be waited for: Redis refuses the confirmation to the sandbox's user (${refused})` : latest === 'online' ? "no replica confirmed the write within the request's time (a replica behind or stopped, or the confirmation's own connection failing)" : missing}`
    // @note Said again when the reason changes (at most every BEHIND_HOLD_MS): only the first was,
    // and a lock-out by the count ("1 of the 2 replicas expected …", with the flag that ends it)
    // never reached the log of a sandbox that first saw a replica stop confirming (attack21 L2).
    const at = monotonicNow()
    let { said, saidAt } = server.behind ?? { said: '', saidAt: Number.NEGATIVE_INFINITY }
    if (server.behind === undefined || (detail !== said && at - saidAt >= BEHIND_HOLD_MS)) {
      this.#warn(`storage replicas: ${detail}; answering 503 write_outcome_unknown to its writes (applied on the master, lost if it fails over now) until ${refused !== undefined ? "its ACL allows WAIT and INFO" : 'one does'}, or start with --redis-allow-failover-loss`)
      said = detail
      saidAt = at
    }
    server.behind = { detail, key, at, said, saidAt }
    throw new WriteOutcomeUnknownError(`${detail}; the write was applied on the master and may be lost by a failover`, { why: latest === 'online' ? 'late' : 'replica' })
  }

  /** The confirmations waiting for `server`, made on first use. */
  #confirmation(server: Server): ReplicaConfirmation {
    let confirmation = this.#confirmations.get(server.address)
    if (confirmation === undefined) {
      confirmation = new ReplicaConfirmation(
        (ms, key) => this.#round(server, ms, key),
        async () => ({ state: await this.#replicaState(server, true), replid: server.replid }),
      )
      this.#confirmations.set(server.address, confirmation)
    }
    return confirmation
  }

  /**
   * One round of a confirmation on the waiter's connection to `server` (see ReplicaConfirmation):
   * a mark (a key of `key`'s slot, kept a minute) and the master's replication offset then, `WAIT
   * <replicas online> ms`, and the replicas' offsets after it. Confirmed when every replica counted
   * (online, not on port 0) has the mark's offset, and they are at least as many as expected.
   * @note WAIT counts every replica's acknowledgement: one the count leaves out (a replica on a Unix
   * socket only, listed on port 0) or does not expect (one attached since the last count) stood in
   * for a counted replica that was behind (attack21 F2: 10 creates answered 201, lost).
   */
  async #round(server: Server, ms: number, key: string): Promise<RoundResult> {
    // Closed: no client is opened again (a write confirmed before the close got its answer).
    if (this.#closed) throw new NotSent('the sandbox is closing')
    if (this.#waiter === undefined) {
      const connection = this.#open()
      this.#waiter = { connection, ready: connection.connecting }
    }
    const waiter = this.#waiter
    // @note Every replica online, not one: a replica that may never be promoted
    // (`cluster-replica-no-failover`, `replica-priority 0`) confirmed writes its master's promoted
    // replica, 4 s behind, did not have (attack18 F6: 7,820 creates answered 201 lost).
    const wanted = Math.max(1, server.replicas ?? 1, this.#expected(server))
    const send = (command: string[], timeout = this.#commandTimeoutMs) => waiter.connection.sendTo(server.address, command, timeout)
    try {
      await bounded(waiter.ready, this.#commandTimeoutMs)
      // The key's slot (the epoch's, `<prefix>epoch`, has no tag: its mark was in another slot, refused on a Cluster).
      const mark = ['1', markKeyOf(key)]
      // The mark and INFO go together: INFO's offset is the mark's, or later (more to wait for, never less).
      let [marked, before] = await Promise.allSettled([send(['EVALSHA', REPLICATION_MARK.sha, ...mark]), send(['INFO', 'replication'])])
      if (marked.status === 'rejected' && messageOf(marked.reason).startsWith('NOSCRIPT')) {
        ;[marked, before] = await Promise.allSettled([send(['EVAL', REPLICATION_MARK.source, ...mark]), send(['INFO', 'replication'])])
      }
      if (marked.status === 'rejected') throw marked.reason
      if (before.status === 'rejected') throw before.reason
      const offset = Number(/^master_repl_offset:(\d+)/m.exec(String(before.value))?.[1] ?? Number.NaN)
      const replid = /^master_replid:(\S+)/m.exec(String(before.value))?.[1]
      const [acknowledged, after] = await Promise.all([send(['WAIT', String(wanted), String(ms)], ms + this.#commandTimeoutMs), send(['INFO', 'replication'], ms + this.#commandTimeoutMs)])
      // The same history after the WAIT too: a failover between the two INFOs confirms nothing.
      const same = replid !== undefined && replid === /^master_replid:(\S+)/m.exec(String(after))?.[1]
      if (!Number.isFinite(offset) || !same) return { confirmed: false, replid: same ? replid : undefined }
      const counted = countedReplicas(String(after))
      const acked = counted.length >= Math.max(1, this.#expected(server)) ? Math.min(...counted.map((replica) => replica.offset)) : undefined
      return { confirmed: Number(acknowledged) >= wanted && acked !== undefined && acked >= offset, replid, offset, acked }
    } catch (error) {
      // A connection that failed is opened again for the next round; an error Redis replied is Redis's.
      if (!(error instanceof ErrorReplied) && this.#waiter === waiter) {
        this.#waiter = undefined
        waiter.connection.close()
      }
      throw error
    }
  }

  /**
   * Redis's time now (ms since the epoch, by Redis's clock; on a Cluster, by `key`'s master's, or
   * without a key its slowest master's),
   * at most: the last reading of `TIME` plus the monotonic time since its answer came, so at or
   * before the true time (by as much as that answer took). A recorded write carries it as the
   * time it was sent (`redis-outcomes.ts`, attack7 K1). Reads the clock first when it never was,
   * or its reading is {@link CLOCK_STALE_MS} old (a failure is a {@link StorageUnavailableError}: nothing was sent), and again in the
   * background at most every {@link CLOCK_READ_MS} while it is asked. With `at` (a moment of
   * {@link monotonicNow}, such as a request's deadline), Redis's time at that moment, at most, the
   * same way: less {@link CLOCK_DRIFT} of the time from the reading to it (the clocks' rates may differ).
   */
  async redisNow(at?: number, key?: string): Promise<number> {
    const clock = this.cluster && key !== undefined ? await this.#tagClock(key) : await this.#sharedClock()
    const moment = at ?? monotonicNow()
    return Math.floor(moment + clock.offset - Math.max(0, moment - clock.at) * CLOCK_DRIFT)
  }

  /** The clock of every master (the slowest), read as {@link redisNow} says. */
  async #sharedClock(): Promise<{ offset: number; at: number }> {
    if (this.#clock === undefined || monotonicNow() - this.#clock.at >= CLOCK_STALE_MS) await this.#readClock()
    // Outside the request's deadline: nobody waits for it, so it has the whole command timeout.
    else if (monotonicNow() - this.#clockReadAt >= CLOCK_READ_MS) requestDeadline.exit(() => this.#readClock()).catch(() => undefined)
    return this.#clock!
  }

  /**
   * On a cluster, the clock of the master holding `key`'s slot: `TIME` sent to it (routed by the
   * key), kept {@link CLOCK_KEEP_MS} for the key's hash tag (a tenant's keys share one).
   * @note The slowest master's clock estimated every master's: a master ahead of it by more than a
   * request's Redis time refused every write of its tenants as late, for as long as it was ahead
   * (attack9 R5: 35 s off, a third of the tenants locked out).
   */
  async #tagClock(key: string): Promise<{ offset: number; at: number }> {
    const tag = hashTag(key)
    const kept = this.#tagClocks.get(tag)
    const master = this.#connection.serverOf(key)
    // @note Read again once the tag's slot has moved to another master (a reshard, a failover):
    // another master's clock estimated the writes of the next 5 s, their deadlines as far off as
    // the clocks were (attack13 T3: a write answered write_outcome_unknown applied after the
    // partner's list; T4: 5 s of writes refused as late on a master ahead).
    if (kept !== undefined && monotonicNow() - kept.at < CLOCK_KEEP_MS && kept.server === master) return kept
    const server = this.#server(master ?? '')
    let reply: Reply
    try {
      reply = await this.#connection.send(key, ['TIME'], this.#timeLeft())
    } catch (error) {
      throw this.#failure(error, server)
    }
    const came = monotonicNow()
    this.recovered(server)
    // The master that answered: the slot's as known now (a MOVED on the way updates it).
    const clock = { offset: Number((reply as string[])[0]) * 1000 + Math.floor(Number((reply as string[])[1]) / 1000) - came, at: came, server: this.#connection.serverOf(key) }
    this.#tagClocks.delete(tag)
    this.#tagClocks.set(tag, clock)
    if (clock.server !== undefined) this.#noteMasterClock(clock.server, clock.offset)
    // The oldest go first: a map as long as the tenants written within a few seconds, at most.
    for (const [old, reading] of this.#tagClocks) {
      if (this.#tagClocks.size <= TAG_CLOCKS && came - reading.at < CLOCK_KEEP_MS) break
      this.#tagClocks.delete(old)
    }
    return clock
  }

  /**
   * Tells the operator when the masters' clocks differ by more than {@link CLOCK_SKEW_MS}, and
   * when they agree again: each write's times are its own master's, so a tenant moved to another
   * master (a reshard, a failover) has writes judged on the other clock for a write or two, its
   * deadlines off by the difference.
   */
  #noteMasterClock(server: string, offset: number): void {
    this.#masterClocks.set(server, offset)
    const masters = new Set(this.#connection.servers())
    for (const known of this.#masterClocks.keys()) if (!masters.has(known)) this.#masterClocks.delete(known)
    const offsets = [...this.#masterClocks.values()]
    const spread = Math.max(...offsets) - Math.min(...offsets)
    if (spread > CLOCK_SKEW_MS && !this.#skewSaid) {
      this.#skewSaid = true
      this.#warn(`clocks apart: the clocks of the masters of Redis at ${this.target.display} differ by about ${Math.round(spread / 1000)} s; a tenant moved between them (a reshard, a failover) may have a write answered by the other clock: keep their clocks in sync (NTP)`)
    } else if (spread <= CLOCK_SKEW_MS / 2 && this.#skewSaid) {
      this.#skewSaid = false
      this.#warn(`clocks agree: the clocks of the masters of Redis at ${this.target.display} agree again`)
    }
  }

  /**
   * On a cluster, whether the clock reading kept for `key`'s hash tag came from another master
   * than the one its slot is on now: a write whose times it estimated and that Redis refused as
   * late may be sent again with new ones (a late write is never applied).
   */
  clockMoved(key: string): boolean {
    const kept = this.#tagClocks.get(hashTag(key))
    return this.cluster && kept !== undefined && kept.server !== this.#connection.serverOf(key)
  }

  /**
   * Reads the clock of `key`'s master again (on one Redis, its clock), the new reading replacing
   * the one kept, and returns Redis's time now by it, as {@link redisNow} does.
   * @note A reading kept across a step back of the clock was kept for being "tighter" (later): the
   * writes it timed were sent later than Redis's time and refused as late until it aged out.
   */
  async readClockAgain(key: string): Promise<number> {
    if (this.cluster) this.#tagClocks.delete(hashTag(key))
    else await this.#readClock(true)
    return this.redisNow(undefined, key)
  }

  /** Reads Redis's clock (every master's): keeps the reading unless the one kept is tighter and recent, or with `replace`. */
  #readClock(replace = false): Promise<void> {
    if (replace) this.#replaceClock = true
    this.#clockReading ??= (async () => {
      this.#clockReadAt = monotonicNow()
      const replies = await this.#each(['TIME'], this.#timeLeft())
      const came = monotonicNow()
      // Each master read its clock before its answer came: its time then was that, or more.
      const offset = Math.min(...replies.map((reply) => Number((reply as string[])[0]) * 1000 + Math.floor(Number((reply as string[])[1]) / 1000))) - came
      if (this.#clock === undefined || this.#replaceClock || offset > this.#clock.offset || came - this.#clock.at >= CLOCK_KEEP_MS) this.#clock = { offset, at: came }
      this.#replaceClock = false
    })().finally(() => {
      this.#clockReading = undefined
    })
    return this.#clockReading
  }

  /**
   * Sends a command to every server holding data, each failure counted against its server: their replies, or the first
   * failure. `own`: a probe of the sandbox's own, whose ACL refusal is Redis answering (undefined in its place).
   */
  async #each(args: string[], ms: number, own = false): Promise<Reply[]> {
    const servers = this.#connection.servers()
    if (servers.length === 0) throw this.#failure(new NotSent("the cluster's masters are not known yet"), this.#server(''))
    return Promise.all(
      servers.map(async (address) => {
        const server = this.#server(address)
        let reply: Reply
        try {
          reply = await this.#connection.sendTo(address, args, ms)
        } catch (error) {
          if (!own || !aclRefusal(error)) throw this.#failure(error, server)
          reply = null
        }
        this.recovered(server)
        return reply
      }),
    )
  }

  /**
   * Whether Redis (every master of a cluster) answers a PING now, within the command timeout, and
   * (once a Redis that may evict was met) whether it still may.
   */
  async ping(): Promise<{ ok: boolean; detail?: string }> {
    if (this.#lost !== undefined) return { ok: false, detail: this.#lost }
    try {
      // A PING its ACL refuses is Redis answering: the probe is the sandbox's own, no request needs it (attack60 F3).
      await this.#each(['PING'], this.#timeLeft(), true)
    } catch (error) {
      return { ok: false, detail: (error as Error).message }
    }
    for (const address of this.#connection.servers()) {
      const server = this.#server(address)
      if (this.#allowEviction || (server.evicting === undefined && !server.checkDue)) continue
      try {
        await this.#sharedRecheck(server)
      } catch (error) {
        return { ok: false, detail: this.#failure(error, server).message }
      }
    }
    for (const address of this.#connection.servers()) {
      const server = this.#server(address)
      if (server.evicting !== undefined) return { ok: false, detail: `${this.#display(server)}: ${server.evicting}` }
    }
    // @note The one Redis is asked whether it takes writes on every health check: a Redis demoted to
    // a read-only replica, or full, answered health 200 until some request tried a write (trial5 P4).
    if (!this.cluster && this.#server('').refusing === undefined) {
      try {
        await this.script(this.#writeProbe(), [this.probeKey], [])
      } catch (error) {
        if (this.#server('').refusing !== undefined) return { ok: false, detail: this.#server('').refusing!.detail }
        return { ok: false, detail: (error as Error).message }
      }
    }
    // A server that refused writes: asked with a write that changes nothing.
    for (const server of [...this.#servers.values()]) {
      const refusing = server.refusing
      if (refusing === undefined) continue
      try {
        await this.script(this.#writeProbe(), [this.cluster ? `${refusing.key.slice(0, refusing.key.indexOf('}') + 1) || refusing.key}:write-probe` : this.probeKey], [])
      } catch {
        if (server.refusing !== undefined) return { ok: false, detail: server.refusing.detail }
        continue
      }
      this.#accepted(server)
    }
    // A master whose replicas confirmed no write lately: asked again (its writes so far on this connection).
    for (const address of this.#connection.servers()) {
      const server = this.#server(address)
      const behind = server.behind
      if (behind === undefined) continue
      const state = await this.#replicaState(server, true)
      const held = monotonicNow() - behind.at < BEHIND_HOLD_MS
      if (state === 'none' || (!held && state === 'online' && (await this.#confirmation(server).confirm(monotonicNow() + REPLICA_WAIT_SLICE_MS, behind.key, server.replid)))) {
        this.#warn(`storage replicas: ${this.#display(server)}: ${state === 'none' ? 'no replica to wait for any more' : 'a replica confirms writes again'}`)
        server.behind = undefined
      } else return { ok: false, detail: behind.detail }
    }
    // A command or key its ACL refused lately: the one Redis's write probe passed above (else it answered there); a
    // cluster's masters, once none was met for DENIED_HOLD_MS.
    for (const server of [...this.#servers.values()]) {
      const denied = server.denied
      if (denied === undefined) continue
      if (!this.cluster || monotonicNow() - denied.at >= DENIED_HOLD_MS) this.#allowed(server)
      else return { ok: false, detail: denied.detail }
    }
    return { ok: true }
  }

  /**
   * @internal The policy could not be read at start (a worker serving all the same): every command reads it first, and is
   * refused while it cannot be read, as when a read of it failed while serving.
   */
  readPolicyOnUse(refusal: string): void {
    this.#policiesRead = true
    for (const address of this.#connection.servers()) {
      const server = this.#server(address)
      server.checkDue = true
      server.evicting = refusal
    }
  }

  /**
   * Why this Redis may lose tenant data by eviction, or undefined when it cannot (or the operator
   * accepted it): every server holding data is asked its `maxmemory-policy` (see {@link #readPolicy}),
   * and what each says is kept for its commands.
   */
  async checkEviction(): Promise<string | undefined> {
    if (this.#allowEviction) return undefined
    const ms = this.#timeLeft()
    const servers = this.#connection.servers()
    if (servers.length === 0) throw new NotSent("the cluster's masters are not known yet")
    const found = await Promise.all(
      servers.map(async (address) => {
        const [evicting, evicted] = await Promise.all([this.#readPolicy(address, ms), this.#readEvicted(address, ms)])
        return { server: this.#server(address), evicting: evicting ?? (evicted !== undefined ? this.#replicaRefusal(evicted) : await this.#roleRefusal(address)), evicted }
      }),
    )
    for (const { server, evicting, evicted } of found) {
      server.evicting = evicting
      server.checkDue = false
      server.checkedAt = monotonicNow()
      this.#noteEvicted(server, evicted)
    }
    this.#policiesRead = true
    return found.find((each) => each.evicting !== undefined)?.evicting
  }

  /**
   * Why one server may evict keys, or undefined: its `maxmemory-policy` by `CONFIG GET`, or by
   * `INFO memory` where CONFIG is disabled or renamed (managed Redis). Any policy but
   * `noeviction` may evict tenant keys, `volatile-*` included: every tenant key has a TTL.
   */
  async #readPolicy(address: string, ms: number): Promise<string | undefined> {
    let policy: string
    try {
      policy = String(((await this.#connection.sendTo(address, ['CONFIG', 'GET', 'maxmemory-policy'], ms)) as unknown[])[1])
    } catch (error) {
      if (!(error instanceof ErrorReplied)) throw error
      policy = /^maxmemory_policy:(\S+)/m.exec(String(await this.#connection.sendTo(address, ['INFO', 'memory'], ms)))?.[1] ?? 'unknown'
    }
    return policy === 'noeviction' ? undefined : `its maxmemory-policy is ${policy}, which may evict tenant keys (acknowledged writes lost)`
  }

  /** The server's count of keys evicted (see {@link EvictedCount}), or undefined where `INFO` is refused (an ACL, renamed): not watched there. */
  async #readEvicted(address: string, ms: number): Promise<EvictedCount | undefined> {
    let info: string
    try {
      info = String(await this.#connection.sendTo(address, ['INFO'], ms))
    } catch (error) {
      if (error instanceof ErrorReplied) return undefined
      throw error
    }
    const runId = /^run_id:(\S+)/m.exec(info)?.[1]
    const count = /^evicted_keys:(\d+)/m.exec(info)?.[1]
    const replicaOf = replicaOfInfo(info)
    return runId === undefined || count === undefined ? undefined : { runId, count: Number(count), replicaOf }
  }

  /**
   * Where `INFO` is refused: why the server is refused for its role, by `ROLE` (a replica, or a role that cannot be read:
   * `ROLE` refused too), or undefined for a master (and a cluster's node).
   * @note A refused ROLE was taken for a master: with a user allowed neither, writes went on to a master demoted to a
   * writable replica for good, 201s lost, health ok, nothing said; taken away while serving, the demoted node was said to
   * be "a master again" (attack57 F1, F1b).
   */
  async #roleRefusal(address: string): Promise<string | undefined> {
    if (this.cluster) return undefined
    let role: unknown
    try {
      role = await this.#connection.sendTo(address, ['ROLE'], this.#timeLeft())
    } catch (error) {
      if (!(error instanceof ErrorReplied)) throw error
      return `whether it is a replica cannot be read (INFO and ROLE refused: ${messageOf(error)}), and what is written to a replica is lost at its next sync`
    }
    if (!Array.isArray(role) || String(role[0]) !== 'slave') return undefined
    return this.#replicaRefusal({ replicaOf: `${String(role[1])}:${String(role[2])}` })
  }

  /** The scripts' replica guard is back (INFO allowed again), said once. */
  #guardBack(): void {
    if (this.#guardDeniedAt === Number.NEGATIVE_INFINITY) return
    this.#guardDeniedAt = Number.NEGATIVE_INFINITY
    this.#warn(`storage: Redis allows INFO to the sandbox's user again: its scripts check again that Redis is not a replica`)
  }

  /**
   * Why commands to the one Redis are refused besides its policy: it is a replica (see
   * {@link RedisLink.checkEviction}), or undefined (a master, a cluster's node, or `INFO` refused).
   * @note A worker of `serve --workers` started while its Redis was a replica (a master demoted by a
   * failover) exited at once, again and again (attack46 F2); a running sandbox whose master was
   * demoted to a writable replica (`replica-read-only no`) took writes its master's next sync erased
   * (attack19 W1, found at start only). Refused as an evicting policy is, read again each second.
   */
  #replicaRefusal(seen: Pick<EvictedCount, 'replicaOf'> | undefined): string | undefined {
    if (this.cluster || seen?.replicaOf === undefined) return undefined
    return `it is a replica of ${seen.replicaOf}: what is written to it is refused (READONLY) or lost at its next sync, and what is read from it may lag`
  }

  /**
   * Keeps the count of keys `server` evicted, and takes storage for lost when it grew since the
   * last read of the same run: Redis evicts only under a policy other than `noeviction`, and which
   * keys went cannot be told, a tenant's among them. A run first seen (a restart, or another node
   * behind the same address) is counted from what it says then; a count below the last in the same
   * run (`CONFIG RESETSTAT`) is counted on from.
   * @note A run first seen was counted from 0: a failover and back to a node that had evicted keys
   * before (22 in its life) was taken for keys evicted while serving, every request refused
   * (review41 R1).
   * @note Keys evicted while an operator had set `allkeys-lru` (refused meanwhile, 503) were served
   * as if nothing was lost once `noeviction` was back: 18 to 30 tenants of 40 lost their acknowledged
   * creates, and their ids were handed out again (attack41 F1).
   */
  #noteEvicted(server: Server, seen: EvictedCount | undefined): void {
    if (seen === undefined) return
    const from = server.evictedSeen.get(seen.runId)
    server.evictedSeen.delete(seen.runId)
    server.evictedSeen.set(seen.runId, seen.count)
    if (server.evictedSeen.size > EVICTED_RUNS) server.evictedSeen.delete(server.evictedSeen.keys().next().value!)
    if (from !== undefined && seen.count > from) this.#keysEvicted(server, from, seen.count)
  }

  /** Redis evicted keys (its count went from `from` to `to`): every command refused from now on, said once. */
  #keysEvicted(server: Server, from: number, to: number): void {
    if (this.#closed || this.#lost !== undefined) return
    this.#lost = `${this.#display(server)} evicted ${to - from} key${to - from === 1 ? '' : 's'} (INFO evicted_keys ${from} -> ${to}: its maxmemory-policy was not noeviction while it was full): tenants' keys may be among them, so what they stored may be gone in part, and every request is answered 503 storage_unavailable so that no id is handed out twice; restart every sandbox on it to go on from what Redis holds (and reset the tenants whose data matters: which keys went cannot be told)`
    this.#warn(`storage lost: ${this.#lost}`)
  }

  /**
   * What every command waits for first: the policy read of the server it goes to after that
   * server failed or was never read (so that no read or write is served by a Redis that came back
   * evicting before it is known), and, while the policy refuses, a read again at most every
   * {@link EVICTION_RECHECK_MS} (so that requests themselves find it fixed). One read at a time
   * per server, shared by every command that waits. A command whose cluster master is not known
   * waits for every master's.
   */
  async #policyRead(server: Server): Promise<void> {
    if (this.#allowEviction || !this.#policiesRead) return
    if (this.cluster && server.address === '') {
      await Promise.all(this.#connection.servers().map((address) => this.#policyRead(this.#server(address))))
      return
    }
    if (server.checking !== undefined) return server.checking
    if (server.checkDue || (server.evicting !== undefined && monotonicNow() - server.checkedAt >= EVICTION_RECHECK_MS)) return this.#sharedRecheck(server)
    // @note A policy changed on a Redis that never failed (`CONFIG SET maxmemory-policy`) is found
    // by a read in the background at most every EVICTION_RECHECK_MS, which no command waits for:
    // writes are refused within about a second of the change (re-attack: never, before).
    if (monotonicNow() - server.checkedAt >= EVICTION_RECHECK_MS) this.#sharedRecheck(server).catch(() => undefined)
  }

  /** The server's policy read in flight, or a new one. */
  #sharedRecheck(server: Server): Promise<void> {
    server.checking ??= this.#recheck(server).finally(() => {
      server.checking = undefined
    })
    return server.checking
  }

  /** Reads a server's eviction policy again (a Redis met on reconnecting, or one refused until fixed). */
  async #recheck(server: Server): Promise<void> {
    server.checkDue = false
    server.checkedAt = monotonicNow()
    let evicting: string | undefined
    let evicted: EvictedCount | undefined
    try {
      const ms = this.#timeLeft()
      ;[evicting, evicted] = await Promise.all([this.#readPolicy(server.address, ms), this.#readEvicted(server.address, ms)])
    } catch (error) {
      // @note Refused (CONFIG and INFO denied): a refusal of Redis, said once, not a failure: taken for one, each command
      // after said Redis "recovered", twice a second, while every request was refused (attack59 F4).
      if (!(error instanceof ErrorReplied) || !INFO_DENIED.test(messageOf(error))) {
        server.checkDue = true
        throw error
      }
      evicting = `${POLICY_UNREAD_TEXT} (${messageOf(error)})`
    }
    // @note Where INFO is refused, ROLE tells a replica: not read, a sandbox on a master demoted to a writable replica
    // wrote there for good, health ok (attack51 F1b: 6,818 of 10,334 201s lost).
    // Where ROLE cannot be asked now (a timeout), the refusal as it was.
    evicting ??= evicted !== undefined ? this.#replicaRefusal(evicted) : await this.#roleRefusal(server.address).catch(() => (server.evicting !== undefined && (REPLICA_REFUSAL.test(server.evicting) || ROLE_UNREAD.test(server.evicting)) ? server.evicting : undefined))
    this.#noteEvicted(server, evicted)
    // @note INFO read again: the scripts' guard is back at once, not after its wait: off 10 s after INFO was refused for
    // a second, a switchover within them lost a second of 201s, nothing said (attack57 F3).
    if (evicted !== undefined) this.#guardBack()
    // @note Said again when a Redis met after a failure still evicts: the "recovered" line just
    // before it would otherwise read as service back (new-user trial).
    if (evicting !== undefined && (server.evicting === undefined || server.recoveredUnchecked || refusalKind(evicting) !== refusalKind(server.evicting))) this.#warn(`storage refused: ${this.#display(server)}: ${evicting}; answering 503 storage_unavailable to requests that use ${server.address === '' ? 'Redis' : 'that master'} ${refusedUntil(evicting)}`)
    else if (evicting === undefined && server.evicting !== undefined) {
      this.#warn(`storage accepted: ${this.#display(server)} ${REPLICA_REFUSAL.test(server.evicting) ? 'is a master again' : ROLE_UNREAD.test(server.evicting) ? 'is a master, its role read again' : POLICY_UNREAD.test(server.evicting) ? 'does not evict keys, its policy read again' : 'no longer evicts keys'}`)
      // @note While the policy refused scripts, the reads each second could not count the beat
      // (a script): a backup restored meanwhile in place (DEBUG RELOAD, a REPLICAOF to a copy) was
      // served from the first command after `noeviction`, ids handed out again until the next
      // read (attack46 F1). The epoch is checked before it, as after a failure.
      server.epochDue = true
    }
    server.evicting = evicting
    server.recoveredUnchecked = false
  }

  /** Why scripts on `server` are refused (its policy may evict), or undefined; for a command whose cluster master is not known, any master's. */
  #evictingFor(server: Server): string | undefined {
    if (!this.cluster || server.address !== '') return server.evicting
    for (const address of this.#connection.servers()) {
      const evicting = this.#servers.get(address)?.evicting
      if (evicting !== undefined) return evicting
    }
    return undefined
  }

  /** The state of the server at `address`, made on first sight (its policy then due). */
  #server(address: string): Server {
    let server = this.#servers.get(address)
    if (server === undefined) {
      server = {
        address,
        failing: undefined,
        failingSince: 0,
        unansweredSince: undefined,
        checkDue: true,
        checking: undefined,
        checkedAt: Number.NEGATIVE_INFINITY,
        evicting: undefined,
        evictedSeen: new Map(),
        recoveredUnchecked: false,
        replicas: undefined,
        replicasSyncing: 0,
        replicasExpected: 0,
        replicaFailing: false,
        replicasUncounted: undefined,
        replid: undefined,
        replicasSharedAt: Number.NEGATIVE_INFINITY,
        replicaAddresses: noReplicaAddresses(),
        replicasRecount: undefined,
        replicasReadAt: Number.NEGATIVE_INFINITY,
        replicasReading: undefined,
        behind: undefined,
        refusing: undefined,
        refusalSaidAt: Number.NEGATIVE_INFINITY,
        denied: undefined,
        deniedSaid: '',
        deniedSaidAt: Number.NEGATIVE_INFINITY,
        deniedTold: false,
        deniedProbedAt: Number.NEGATIVE_INFINITY,
        // @note First seen once the token was taken (a replica promoted at its own address, on a
        // Cluster), its first commands went unchecked: from an older state, 6-48 ids handed out
        // again before the next second's read (attack39 F3). Checked before its first command, as a
        // master that failed is.
        epochDue: this.#epoch !== undefined,
        epochChecking: undefined,
      }
      this.#servers.set(address, server)
    }
    return server
  }

  /** The server a command with `key` goes to: on a cluster its slot's master, or the client as a whole when not known. */
  #serverFor(key: string | undefined): Server {
    return this.#server(this.#connection.serverOf(key) ?? '')
  }

  /** "Redis at <url>", and on a cluster which master. */
  #display(server: Server): string {
    return server.address === '' || !this.cluster ? `Redis at ${this.target.display}` : `Redis at ${this.target.display} (master ${server.address})`
  }

  /** @internal the client's error events and failed commands */
  failed(error: unknown): StorageUnavailableError {
    this.#policiesRead = true
    return this.#failure(error, this.#server(''), false)
  }

  /** @internal `server` (the one Redis without it) answering again */
  recovered(server: Server = this.#server('')): void {
    if (server.denied !== undefined) this.#probeDenied(server)
    // On a cluster, any master answering shows the client as a whole works.
    if (server.address !== '' && this.#servers.get('')?.failing !== undefined) this.recovered(this.#server(''))
    if (server.failing === undefined) return
    server.failing = undefined
    server.unansweredSince = undefined
    const display = this.#display(server)
    if (this.#allowEviction) this.#warn(`storage recovered: ${display} answers again`)
    else if (server.checkDue || server.checking !== undefined) {
      // The policy read to come says whether it serves (refused again, or accepted).
      server.recoveredUnchecked = true
      this.#warn(`storage recovered: ${display} answers again (its eviction policy is read before it serves)`)
    } else if (this.#evictingFor(server) !== undefined) this.#warn(`storage recovered: ${display} answers again, but is still refused: ${this.#evictingFor(server)}`)
    else this.#warn(`storage recovered: ${display} answers again`)
    // It may be another Redis, or the same one restarted with another configuration: read its
    // policy now (commands wait for it; #failure marked it due).
    if (!this.#allowEviction && (server.address !== '' || !this.cluster)) this.#sharedRecheck(server).catch(() => undefined)
    this.#forgetGone()
  }

  /**
   * Drops failing masters that serve no slot now (failed over, removed): their tenants are served
   * by others, whose own state counts.
   */
  #forgetGone(): void {
    if (!this.cluster) return
    const servers = this.#connection.servers()
    if (servers.length === 0) return
    for (const [address, server] of this.#servers) {
      if (address === '' || servers.includes(address) || server.failing === undefined) continue
      this.#servers.delete(address)
      this.#warn(`storage recovered: ${this.#display(server)} no longer serves any slot; its tenants are served by the masters that took them`)
    }
  }

  /**
   * What is left of the time of the request being served (ms), or undefined outside a request;
   * 0 once it is up.
   */
  requestTimeLeft(): number | undefined {
    const deadline = requestDeadline.getStore()
    return deadline === undefined ? undefined : Math.max(0, Math.floor(deadline.at - monotonicNow()))
  }

  /** When the Redis work of the request being served must be over ({@link monotonicNow} ms), or undefined outside a request. */
  requestDeadline(): number | undefined {
    return requestDeadline.getStore()?.at
  }

  /**
   * Takes no more commands, and closes the clients once the commands in flight are answered (at
   * most the command timeout): a write under way is answered as Redis applied it, or not.
   * @note The clients were destroyed at once: a create in flight lost its reply, and its request
   * waited out its whole time (30 s) settling on a closed link, then answered 503
   * write_outcome_unknown, the process kept alive meanwhile (attack26 F3).
   */
  close(): Promise<void> {
    if (this.#closed) return this.#closing ?? Promise.resolve()
    this.#closed = true
    clearInterval(this.#epochTimer)
    for (const server of this.#servers.values()) clearTimeout(server.replicasRecount)
    this.#renewing?.close()
    this.#renewing = undefined
    const waiter = this.#waiter
    this.#waiter = undefined
    this.#closing = Promise.all([this.#connection.retire(this.#commandTimeoutMs), waiter?.connection.retire(this.#commandTimeoutMs)]).then(() => undefined)
    return this.#closing
  }

  /**
   * Reads the epoch token now (writing one when there is none: the first sandbox on this Redis),
   * then every {@link EPOCH_READ_MS} counts its beat up, a write confirmed by the replicas as
   * any: once the token is gone or another, Redis no longer holds what the sandboxes wrote
   * (`FLUSHALL`, a restart without persistence, a replica promoted empty); once the beat is at or
   * below one this process counted and saw confirmed, Redis went back in time (restarted from an
   * older snapshot: RDB, AOF without `appendfsync always`, a backup restored), and what it was
   * answered since is gone. Then every command is refused (503 storage_unavailable, health
   * degraded, said once) until this process restarts: its tenants would otherwise start again
   * from their seed, or from an older state, the ids they were given handed out again.
   * @note Keys deleted under a running sandbox were not noticed (attack23 R1); nor a Redis
   * restarted from an older snapshot, the token in it (attack28 F1: two 201s gone, id 7 handed out again).
   * @note The beat a process remembers is one its replicas confirmed: a replica promoted holds it
   * (one behind was waited for), so a failover is not taken for time going back.
   */
  async watchEpoch(): Promise<void> {
    if (this.epochKey === undefined || this.#epochTimer !== undefined || this.#closed) return
    await this.#readEpoch()
    this.#epochTimer = setInterval(() => void this.#readEpoch(), EPOCH_READ_MS)
    this.#epochTimer.unref()
  }

  /**
   * @note One at a time: a beat waiting for its replicas overlapped the next, which was confirmed
   * first; the first, confirmed then, counted below it and was taken for time going back (every
   * request refused, nothing lost).
   */
  #readEpoch(): Promise<void> {
    this.#epochReading ??= this.#readEpochNow().finally(() => {
      this.#epochReading = undefined
      this.#tellEpoch()
    })
    return this.#epochReading
  }

  /** Tells {@link #onEpoch} the epoch, when it is newer than the one told last; once storage is lost, that (once). */
  #tellEpoch(): void {
    const token = this.#epoch
    if (this.#onEpoch === undefined || token === undefined || this.#closed) return
    if (this.#lost !== undefined) {
      if (this.#lostTold) return
      this.#lostTold = true
      try {
        this.#onEpoch({ token, beat: this.#remembered, lost: this.#lost })
      } catch {
        // The listener's own failure: nothing of the link's.
      }
      return
    }
    const beat = this.#remembered
    if (this.#epochTold?.token === token && this.#epochTold.beat >= beat) return
    this.#epochTold = { token, beat }
    try {
      this.#onEpoch(this.#epochTold)
    } catch {
      // The listener's own failure: nothing of the link's.
    }
  }

  async #readEpochNow(): Promise<void> {
    const key = this.epochKey
    const beatKey = this.beatKey
    if (key === undefined || beatKey === undefined || this.#lost !== undefined || this.#closed) return
    try {
      if (this.#epoch === undefined) {
        const proposed = randomBytes(12).toString('base64url')
        let taken: string
        try {
          const reply = await this.#connection.send(key, ['EVAL', EPOCH_TAKEN, '1', key, proposed], this.#commandTimeoutMs)
          // Another's token taken only from a Redis (a peer echoing commands would hand over the command itself).
          if (reply !== proposed && !(await this.#answeredByRedis(key, reply, this.#commandTimeoutMs))) return
          taken = String(reply)
        } catch (error) {
          if (/WRONGTYPE/.test(messageOf(error))) this.#tokenUnusable = true
          throw error
        }
        // @note The token of no use (by hand) while this process wrote, unwatched, then gone: the
        // keys went with it (a FLUSHALL taken for the fix: 246 ids handed out again, attack39 F4).
        if (taken === proposed && this.#tokenUnusable && this.#writesApplied > 0) {
          this.#keysLost(key, null)
          return
        }
        this.#epoch = taken
        return
      }
      // @note The policy and the count of keys evicted read each second here too (the beat's script reads them, but a
      // sandbox with --redis-allow-failover-loss runs none): an idle such sandbox never read them, and evictions
      // followed by a restart (a new run, counting from 0) were never seen, ids handed out again (attack49 F2).
      await this.#policyRead(this.#serverFor(key))
      if (this.#lost !== undefined) return
      const held = await this.#connection.send(key, ['GET', key], this.#commandTimeoutMs)
      if (held !== this.#epoch) {
        if (held === null && (await this.#tokenAloneGone(key, beatKey, this.#commandTimeoutMs))) return
        if (!(await this.#answeredByRedis(key, held, this.#commandTimeoutMs))) return
        this.#keysLost(key, held)
        return
      }
      // @note With --redis-allow-failover-loss no write waits for a replica, the beat neither: a
      // failover may lose the last ones, as the operator accepted; it is not time going back. The
      // beat is counted loosely, before a write (see #countLoosely), not here.
      if (this.#allowFailoverLoss) return
      // Counted up only after writes of this process since its last beat: an idle Redis that lost
      // its last second (AOF everysec, killed) lost nothing of the tenants', and is not refused.
      const writes = this.#writesApplied
      const counting = writes !== this.#writesBeaten
      // Read first, unconfirmed: a beat counted loosely above this process's own is one the
      // writes answered by others, waiting for no replica, stand on, whether or not this process
      // sees it confirmed.
      // @note A sandbox that could not see the beat confirmed (a replica stopped) kept its own:
      // with writers of --redis-allow-failover-loss on the Redis, restarted from a snapshot older
      // than their 201s, it served that state and handed out again ~300 ids they had answered
      // (attack32 F1). Without that flag, what such a beat stands on was answered 503
      // write_outcome_unknown, and a failover to a replica behind is no time going back.
      const keys = this.#beatKeys(beatKey)
      const [seen, loose] = beatsOf(await this.script(EPOCH_BEAT, keys, ['0']))
      if (loose > this.#beat && loose <= seen) this.#looseSeen = Math.max(this.#looseSeen, loose)
      if (seen < this.#remembered) return this.#wentBack(beatKey, seen)
      // @note One confirmation at a time, and the reads go on each second meanwhile: waited for
      // here, a confirmation a stopped replica never gave held the next read for the command
      // timeout, the loose beats read every 3 s, and a restore from a snapshot 2-3 s old was
      // missed (attack33 F4: 664 ids handed out twice).
      if (this.#beatConfirming !== undefined) return
      const before = this.#remembered
      if (counting) this.#beatConfirming = this.#countBeat(beatKey, keys, before, writes)
      else if (seen > this.#beat) this.#beatConfirming = this.#confirmBeat(beatKey, keys, before)
      // Told once confirmed, not a read later (the review of attack39 F6's fix: a worker dying in that second told its siblings' older beat).
      void this.#beatConfirming?.finally(() => {
        this.#beatConfirming = undefined
        this.#tellEpoch()
      })
    } catch (error) {
      // Redis failing, the write not confirmed, or a key of another type: said by the commands that meet it, and by health.
      // Refused by its ACL: Redis losing its keys or going back in time is not watched meanwhile; said, health degraded.
      if (aclRefusal(error)) this.#denied(this.#serverFor(key), messageOf(error), error)
    }
  }

  /** The keys {@link EPOCH_BEAT} runs on: the beat, and the last beat counted loosely when it has a key. */
  #beatKeys(beatKey: string): string[] {
    return this.looseKey === undefined ? [beatKey] : [beatKey, this.looseKey]
  }

  /**
   * Counts the beat up after this process's writes (`writes` of them applied so far), confirmed
   * by the replicas as a write: it is this process's beat then, unless it is not above `before`
   * (the beat remembered when the count began): Redis went back in time.
   */
  async #countBeat(beatKey: string, keys: string[], before: number, writes: number): Promise<void> {
    try {
      const [beat] = beatsOf(await this.script(EPOCH_BEAT, keys, ['1'], { confirm: true }))
      if (beat <= before) return this.#wentBack(beatKey, beat, before)
      this.#beat = Math.max(this.#beat, beat)
      this.#writesBeaten = writes
    } catch {
      // Not confirmed, or Redis failing: counted again at the next read.
    }
  }

  /**
   * Reads the beat another process counted up again, confirmed by the replicas as a write is (the
   * confirmation covers every value read before it): it is this process's beat too, unless it is
   * below `before` (the beat remembered when the confirmation began): Redis went back in time.
   * Quiet: no write of this process's waits on it.
   * @note A process that wrote nothing since an older snapshot was taken compared the restored
   * beat with its own, older, and served the old state, the ids others had answered handed out
   * again (attack30 F2: a worker of --workers 2 that held no write connection). A confirmed beat
   * the counting processes wrote beside it was not written by a version before, nor by one with
   * --redis-allow-failover-loss, and could be left above the beat (attack31 F1-F3). Not quiet,
   * its failure degraded health and said "answering 503 write_outcome_unknown to its writes" on
   * every sandbox while a replica stalled (attack32 F2).
   */
  async #confirmBeat(beatKey: string, keys: string[], before: number): Promise<void> {
    try {
      const [confirmed] = beatsOf(await this.script(EPOCH_BEAT, keys, ['0'], { confirm: true, quiet: true }))
      if (confirmed < before) return this.#wentBack(beatKey, confirmed, before)
      this.#beat = Math.max(this.#beat, confirmed)
    } catch {
      // Not confirmed (a replica stopped), or Redis failing: tried again at the next read.
    }
  }

  /**
   * With --redis-allow-failover-loss, before a write: counts the beat up loosely, marking it so
   * (see {@link EPOCH_BEAT}), at most once every {@link EPOCH_READ_MS}, sent ahead of the write on
   * the same connection, so that Redis has the count before the write: a failover or a restore
   * that lost the count lost the write after it too. Not waited for; its failure is the write's
   * to meet.
   * On one Redis, a script that can (`inScript`: it ends with {@link COUNT_LOOSELY}) counts it
   * itself once it wrote: answers what to give it last for that. On a Cluster (the beat in another
   * slot than the write's), only before a write to the beat's master (`writeKey`'s slot there): a
   * write to another master is not on the connection of the count, and a restore or failover of
   * another master is not watched.
   * @note Counted each second after the writes, a count a failover lost alone (every write there)
   * was taken by the sandboxes without the flag that read it for Redis gone back in time: every
   * request refused until restarted, though no 201 was lost (attack33 F3). Counted on the beat's
   * master before writes to other masters, a failover of the beat's master that lost only the
   * counts did the same on a Cluster (attack35 F1); and on one Redis, counts before creates that
   * their script refused (attack35 F4: now counted inside the script; still so on a Cluster).
   */
  #countLoosely(writeKey: string | undefined, inScript: boolean): readonly string[] | undefined {
    const beatKey = this.beatKey
    if (!this.#allowFailoverLoss || beatKey === undefined || this.#epoch === undefined || monotonicNow() - this.#looselyAt < EPOCH_READ_MS) return undefined
    if (this.cluster && this.#connection.serverOf(writeKey) !== this.#connection.serverOf(beatKey)) return undefined
    // @note On one Redis only a write whose script counts it (a create) counts, inside it: sent ahead
    // of the other writes (a switch, a reset: refused by their scripts too, past the budget), the
    // count could still be lost alone (the review of attack35 F4's fix). They hand out no id: a
    // failover or restore losing them loses what the flag accepts, no id twice.
    if (!this.cluster && this.looseKey !== undefined) {
      if (!inScript) return undefined
      this.#looselyAt = monotonicNow()
      return ['L', beatKey, this.looseKey]
    }
    this.#looselyAt = monotonicNow()
    const keys = this.#beatKeys(beatKey)
    // EVAL, not EVALSHA: a script Redis does not know yet would be sent again after the write.
    this.#connection.send(beatKey, ['EVAL', EPOCH_BEAT.source, String(keys.length), ...keys, 'L'], this.#commandTimeoutMs).catch(() => undefined)
    return undefined
  }

  /**
   * What a command to `server` waits for first after that server failed (a restart closes the
   * connections): the token and the beat read (one check at a time, shared by every command that
   * waits, within the request's time), so that a Redis restarted from an older snapshot, or
   * empty, is refused from its first command, not from the next second's read. A check that
   * cannot be made fails the command as not sent (503 storage_unavailable), and is made again by
   * the next one. On a Cluster, only for the master holding the token.
   * @note Read only each second, a Redis restarted from an older snapshot answered writes from
   * that state until the next read: at 50 creates a second, 47 ids of 48 handed out twice
   * (attack29). Reading before the next command whatever the time left, and going on when it
   * failed, spent a stalled connection's whole command timeout twice a command: the settle of a
   * create that went unanswered ran out of time, and said unknown (its reverted first try).
   */
  async #epochCheck(server: Server): Promise<void> {
    if (!server.epochDue) return
    const key = this.epochKey
    const beatKey = this.beatKey
    if (key === undefined || beatKey === undefined || this.#epoch === undefined || (this.cluster && server.address !== this.#connection.serverOf(key))) {
      // Not watched (yet: the token is taken by the first read of watchEpoch), or not this master's.
      server.epochDue = false
      return
    }
    server.epochChecking ??= this.#checkEpoch(server, key, beatKey).finally(() => (server.epochChecking = undefined))
    return server.epochChecking
  }

  async #checkEpoch(server: Server, key: string, beatKey: string): Promise<void> {
    // What this process knew before asking: a beat confirmed while the read is on its way is newer than the read.
    const epoch = this.#epoch
    const remembered = this.#remembered
    const held = await this.#read(key)
    if (held !== NO_USE && held !== epoch && !(held === null && (await this.#tokenAloneGone(key, beatKey, this.#timeLeft())))) {
      if (!(await this.#answeredByRedis(key, held, this.#timeLeft()))) {
        throw new StorageUnavailableError(`${this.#display(server)}: what answers on Redis's address is not Redis (it answered GET ${key} with ${describeReply(held)}): a connection that met itself one hop away, or another program on the port? Dialing again`, { until: 'brief' })
      }
      this.#keysLost(key, held)
      throw new StorageUnavailableError(this.#lost ?? `${this.#display(server)}: the sandbox is closing`, { until: this.#lost === undefined ? 'brief' : 'restart' })
    }
    const read = await this.#read(beatKey)
    // @note A beat of no use (by hand: "-1", "", "0x1") read as the number it spells was taken for
    // one below the remembered: storage lost after a restart that lost nothing, though the reads
    // each second served on (attack39 F1). Gone (null), it is 0: time went back.
    const beat = read === null ? 0 : usableBeatText(read) ? Number(read) : Number.NaN
    if (beat < remembered && !this.#allowFailoverLoss) {
      this.#wentBack(beatKey, beat, remembered)
      throw new StorageUnavailableError(this.#lost ?? `${this.#display(server)}: the sandbox is closing`, { until: this.#lost === undefined ? 'brief' : 'restart' })
    }
    server.epochDue = false
  }

  /**
   * `GET key` within `ms` (the request's time); {@link NO_USE} when the key holds another type of value
   * (written by hand): of no use, as the reads each second take it (health says so), not a failure.
   * @note A WRONGTYPE thrown here left the check due: after any reconnect, every request of every
   * tenant refused until the key was fixed, though the reads each second served on (attack35 F2).
   */
  async #read(key: string, ms = this.#timeLeft()): Promise<unknown> {
    try {
      return await this.#connection.send(key, ['GET', key], ms)
    } catch (error) {
      if (messageOf(error).startsWith('WRONGTYPE')) return NO_USE
      throw error
    }
  }

  /**
   * Whether the token at `key` alone was deleted (by hand): the beat is still there, at or above
   * the one this process remembers (a flush, an empty restart or promotion takes it too: no process
   * counts the beat before it has read the token). The token is then written again as it was.
   * On a Cluster only where the token and the beat share a master: another master lost whole would
   * leave the beat.
   * @note Deleted alone, every sandbox refused every request until restarted, though nothing else
   * was lost (attack28 F3).
   */
  async #tokenAloneGone(key: string, beatKey: string, ms: number): Promise<boolean> {
    const epoch = this.#epoch
    if (epoch === undefined || (this.cluster && this.#connection.serverOf(key) !== this.#connection.serverOf(beatKey))) return false
    // A beat of another type (by hand) is of no use: the token is not written back (attack35 F2's review).
    const beat = await this.#read(beatKey, ms)
    if (!usableBeatText(beat) || Number(beat) < this.#remembered) return false
    if (String(await this.#connection.send(key, ['EVAL', EPOCH_TAKEN, '1', key, epoch], ms)) !== epoch) return false
    this.#warn(`storage: ${key} was gone while ${beatKey} was not (deleted by hand?): written again as it was; nothing else is taken for lost`)
    return true
  }

  /**
   * Whether `reply` to a command about `key` came from a Redis: a string or nothing, and an `ECHO` of a word of its own
   * answered with that word (or refused: a Redis's error). When not (a peer that sends the commands back, a TCP forwarder
   * whose own connection met itself, or a program answering `+OK` to everything), says so (once a while) and opens a new
   * connection: never taken for a Redis that lost the sandbox's keys.
   * @note Taken for "another token", a forwarder's echo of `GET petstore-sandbox:epoch` (or a `+OK`) made every sandbox on
   * it answer 503 until restarted though Redis came back whole (attack81 F2: 3 of 3 forwarder runs, 1 of 1 each squatter).
   */
  async #answeredByRedis(key: string, reply: unknown, ms: number): Promise<boolean> {
    let redis = reply === null || typeof reply === 'string'
    if (redis) {
      const word = randomBytes(9).toString('base64url')
      try {
        redis = (await this.#connection.send(key, ['ECHO', word], ms)) === word
      } catch (error) {
        if (!(error instanceof ErrorReplied)) throw error
      }
    }
    if (redis) return true
    const now = monotonicNow()
    if (now - this.#renewedAt >= EPOCH_READ_MS) {
      this.#warn(`storage failing: Redis at ${this.target.display}: what answers on its address is not Redis (GET ${key} answered ${describeReply(reply)}): a connection that met itself one hop away (a TCP forwarder's), or another program on the port? Dialing again; nothing is taken for lost`)
      this.#renew(now, this.#serverFor(key))
    }
    return false
  }

  /** Redis no longer holds the token at `key` (`held` there instead): every command refused from now on, said once. */
  #keysLost(key: string, held: unknown): void {
    if (this.#closed || this.#lost !== undefined) return
    this.#lost = `Redis at ${this.target.display} no longer holds the sandbox's keys (${key} ${held === null ? 'is gone' : 'holds another token'}: FLUSHALL or FLUSHDB, a restart without persistence, a replica promoted empty, or another program using the key prefix${this.#allowEviction ? '; or evicted, as --redis-allow-eviction lets Redis do' : ''}?): what the tenants stored there is gone, and every request is answered 503 storage_unavailable so that no id is handed out twice; restart every sandbox on it to start each tenant again from its seed (if only that key was deleted by hand, nothing else was lost: restart them all the same)`
    this.#warn(`storage lost: ${this.#lost}`)
  }

  /**
   * The beat Redis must hold at least: the highest this process saw confirmed, or read counted
   * loosely (see {@link EPOCH_BEAT}) above it.
   */
  get #remembered(): number {
    return Math.max(this.#beat, this.#looseSeen)
  }

  /** Redis holds the beat `beat`, below `remembered` which was confirmed, or counted loosely and read: every command refused from now on, said once. */
  #wentBack(beatKey: string, beat: number, remembered = this.#remembered): void {
    if (this.#closed || this.#lost !== undefined) return
    const loosely = remembered > this.#beat
    this.#lost = `Redis at ${this.target.display} went back in time: the sandbox's epoch beat (${beatKey}) is ${beat}, ${remembered} was ${loosely ? 'counted before by a sandbox with --redis-allow-failover-loss (its writes answered without waiting for a replica) and read by this one' : 'written and confirmed before'} (restarted from an older snapshot: RDB, or AOF without appendfsync always; a backup restored${loosely ? '; a failover to a replica that did not have it' : ''}${this.#allowEviction ? '; or the beat evicted, as --redis-allow-eviction lets Redis do (attack30 F6)' : ''}?): what the sandboxes were answered since that snapshot is gone, and every request is answered 503 storage_unavailable so that no id is handed out twice; restart every sandbox on it to go on from what Redis holds`
    this.#warn(`storage lost: ${this.#lost}`)
  }

  /** Whether {@link close} was called: no command is sent from then on. */
  get closed(): boolean {
    return this.#closed
  }

  /**
   * How long the next command may take: the command timeout, or less when the request it serves
   * must be over sooner. Throws a {@link StorageUnavailableError} when that time is already up.
   */
  #timeLeft(): number {
    const deadline = requestDeadline.getStore()
    if (deadline === undefined) return this.#commandTimeoutMs
    const left = Math.floor(deadline.at - monotonicNow())
    if (left <= 0) {
      // @note Said once per request: a request answered 503 for its own lack of time, Redis
      // healthy, was otherwise in no log (attack2 F7).
      if (!deadline.warned) this.#warn(`request out of time: a request's Redis work ran past its deadline (its request timeout less the answer's margin), answering 503 storage_unavailable; Redis itself is not failing`)
      deadline.warned = true
      throw new RequestTimeUp(`Redis at ${this.target.display}: the request's time for Redis is up`)
    }
    return Math.min(this.#commandTimeoutMs, left)
  }

  /** `unanswered`: the error is a command's own failure (not an error event of the client). */
  #failure(error: unknown, server: Server, unanswered = true): StorageUnavailableError {
    if (error instanceof RequestTimeUp) return error
    if (error instanceof StorageUnavailableError) return error
    // Refused by a client closing on purpose: Redis is not failing (attack26 F3: "storage failing" a request).
    if (this.#closed) return new StorageUnavailableError(`${this.#display(server)}: the sandbox is closing (${messageOf(error)})`, { cause: error })
    const detail = `${this.#display(server)}: ${messageOf(error)}`
    // @note A slot being moved (TRYAGAIN: a script's keys half on each master) is Redis answering,
    // healthy: refused, the master not marked failing. Each one flapped the log failing/recovered
    // and made its policy read again: 275 pairs of lines and 700 CONFIG GETs a second (attack15 L1).
    if (error instanceof ErrorReplied && messageOf(error).startsWith('TRYAGAIN')) return new StorageUnavailableError(detail, { cause: error })
    const now = monotonicNow()
    // @note A key of the wrong type (written by hand, or by another program sharing the prefix) is
    // one tenant's data broken, Redis healthy: refused, said at most once a minute. Each request of
    // that tenant flapped the log failing/recovered for the whole Redis (attack23 R2: 426 lines in 7 s).
    // @note An error a script raised as it ran (a value it cannot use: a count that is no number) is
    // the data's too: each request flapped the log failing/recovered (attack27 F4: 799 pairs in 8 s).
    if (error instanceof ErrorReplied && (WRONG_TYPE.test(messageOf(error)) || SCRIPT_RUNTIME_ERROR.test(messageOf(error)))) {
      if (now - this.#wrongTypeSaidAt >= WRONG_TYPE_SAID_MS) {
        this.#wrongTypeSaidAt = now
        this.#warn(`storage: a key holds the wrong type of value, or one the sandbox cannot use (${detail}; written by hand, or by another program using the key prefix?): answering 503 to the requests that use it until it is deleted (a tenant's: DELETE /__sandbox/tenants/<id>; one every tenant shares: named in the log once health looks); Redis itself is not failing`)
      }
      return new WrongTypeError(`${detail}: a key it uses holds the wrong type of value`, { cause: error })
    }
    // Refused by its ACL: Redis answers (attack60 F4).
    if (aclRefusal(error)) return this.#denied(server, messageOf(error), error)
    // Whatever answers next may be another Redis, or this one restarted with another policy; on a
    // cluster, the client as a whole failing may have met any master.
    server.checkDue = true
    server.epochDue = true
    // @note Its replicas and replication history are read again before the next write: a Redis
    // restarted (or a replica promoted) behind the address has another history, and a write
    // recorded under the old one was never confirmed in the new (the model-based suite, seed 3).
    server.replicasReadAt = Number.NEGATIVE_INFINITY
    // A Redis restarted behind the address lists its replicas anew.
    server.replicaAddresses = noReplicaAddresses()
    if (this.cluster && server.address === '') {
      for (const other of this.#servers.values()) {
        other.checkDue = true
        other.epochDue = true
        other.replicasReadAt = Number.NEGATIVE_INFINITY
      }
    }
    if (server.failing === undefined) {
      this.#warn(`storage failing: ${detail}; answering 503 storage_unavailable ${server.address === '' ? 'until it recovers' : "to that master's tenants until it recovers"}`)
      server.failingSince = now
    }
    server.failing = detail
    // Unanswered: sent (or read for) and no reply; not a refusal to send, nor an error Redis replied.
    if (unanswered && !(error instanceof NotSent) && !(error instanceof ErrorReplied)) server.unansweredSince ??= now
    const since = this.#renewOn === 'any' ? server.failingSince : server.unansweredSince
    const renewAfter = this.#renewAfterMs
    if (renewAfter !== undefined && since !== undefined && now - since >= renewAfter && now - this.#renewedAt >= renewAfter) this.#renew(now, server)
    return new StorageUnavailableError(detail, { cause: error })
  }

  /**
   * Opens a fresh client, and makes it the link's once it has connected (slots discovered): the
   * old one then finishes what it has in flight and closes. One not connected within the renewal
   * time is given up.
   * @note The old client was closed at once: every command in flight on the healthy masters failed,
   * and a fresh cluster client whose discovery asked the stalled master first served nobody until
   * that master answered (attack11 R7).
   */
  #renew(now: number, server: Server): void {
    this.#renewedAt = now
    if (this.#renewing !== undefined || this.#closed) return
    const fresh = this.#open()
    this.#renewing = fresh
    this.#warn(`storage still failing after ${Math.round((now - server.failingSince) / 1000)} s: reconnecting to ${this.#display(server)} with a new client`)
    const giveUp = setTimeout(() => {
      if (this.#renewing !== fresh) return
      this.#renewing = undefined
      fresh.close()
    }, this.#renewAfterMs ?? RENEW_AFTER_FAILING_MS)
    giveUp.unref()
    fresh.connecting.then(
      () => {
        clearTimeout(giveUp)
        if (this.#renewing !== fresh) return
        this.#renewing = undefined
        const old = this.#connection
        fresh.adopt()
        this.#connection = fresh
        void old.retire(this.#commandTimeoutMs)
      },
      () => {
        clearTimeout(giveUp)
        if (this.#renewing === fresh) this.#renewing = undefined
        fresh.close()
      },
    )
  }
}
