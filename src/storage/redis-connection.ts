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
import { createHash } from 'node:crypto'
import type * as Redis from 'redis'
import type { RedisClientOptions } from 'redis'
import { monotonicNow } from '../core/clock.js'
import { StorageUnavailableError } from './storage.js'
import { PetstoreError } from '../core/petstore-error.js'

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
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

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

/** While a replica writes, it reads Redis's clock again at most this often (ms): see {@link RedisLink.redisNow}. */
const CLOCK_READ_MS = 1000
/** A reading of Redis's clock is kept over a later, looser one (an answer that took longer) this long (ms). */
const CLOCK_KEEP_MS = 5000
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

/** Redis's error reply to a command (`LOADING`, `READONLY`, a script's own error): an answer. */
class ErrorReplied extends Error {}

/** An error a script raised on purpose (`redis.error_reply('NOSEED')`): not a storage failure. */
export class RedisScriptRefusal extends Error {
  override readonly name = 'RedisScriptRefusal'
}

type Reply = unknown
/** Sends one command; it fails when not answered within `ms`. */
type Send = (firstKey: string | undefined, args: string[], ms: number) => Promise<Reply>
/** Sends one command to every server that holds data (the one server, or every cluster master) within `ms`; their replies. */
type Each = (args: string[], ms: number) => Promise<Reply[]>

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
  readonly each: Each
  /** Settles once the client is connected (slots discovered, for a cluster). */
  readonly connecting: Promise<void>
  /** Makes the client the link's current one (its errors are reported from then on). */
  adopt(): void
  close(): void
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
      client.on('error', onError)
      // @note Not node-redis's 'ready' for "recovered": it comes as soon as a connection opens,
      // while a restarted Redis may still answer every command LOADING (node-redis#2667); a
      // command answered says so instead (RedisLink.call).
      const send: Send = (_key, args, ms) => bounded(client.sendCommand(args, { timeout: ms }).catch(notSent), ms)
      return {
        send,
        each: async (args, ms) => [await send(undefined, args, ms)],
        connecting: client.connect().then(() => undefined),
        adopt: () => (current = true),
        close: () => client.destroy(),
      }
    }
    const cluster = redis.createCluster({
      rootNodes: target.urls.map((url) => ({ url })),
      defaults: { ...common, ...credentials(target.urls[0]!) },
    })
    cluster.on('error', onError)
    return {
      send: (key, args, ms) => bounded(cluster.sendCommand(key, false, args, { timeout: ms }).catch(notSent), ms),
      // Health asks every master: one shard down leaves its tenants unserved.
      each: (args, ms) => Promise.all(cluster.masters.map(async (master) => bounded(Promise.resolve(cluster.nodeClient(master)).then((node) => node.sendCommand(args)).catch(notSent), ms))),
      connecting: cluster.connect().then(() => undefined),
      adopt: () => (current = true),
      close: () => cluster.destroy(),
    }
  }
  const connected = new RedisLink(target, open, warn, {
    renewAfterMs: RENEW_AFTER_FAILING_MS,
    // @note A standalone client is renewed only for commands that go unanswered: a Redis answering
    // errors (LOADING) or refused at once (down: node-redis reconnects by itself) gains nothing from it.
    renewOn: target.mode === 'cluster' ? 'any' : 'unanswered',
    commandTimeoutMs: timeout,
    allowEviction: options.allowEviction,
  })
  link = connected
  const limit = options.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      connected.connecting.then(() => connected.call(undefined, ['PING'])),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${limit} ms${lastError === undefined ? '' : ` (${messageOf(lastError)})`}`)), limit)
      }),
    ])
  } catch (error) {
    if (options.unreachableAtStart === 'serve') {
      // The client goes on reconnecting (or, in a cluster, is renewed): the link recovers by itself.
      started = true
      connected.failed(new Error(`no answer at start (${messageOf(error)})`))
      return connected
    }
    await connected.close().catch(() => undefined)
    throw new PetstoreError('invalid_option', `Cannot reach Redis at ${target.display}: ${messageOf(error)}. Start it, or check --redis-url.`)
  } finally {
    clearTimeout(timer)
  }
  const evicting = await connected.checkEviction().catch((error: unknown) => `its maxmemory-policy could not be read (${messageOf(error)})`)
  if (evicting !== undefined) {
    await connected.close().catch(() => undefined)
    throw new PetstoreError('invalid_option', `Cannot use Redis at ${target.display}: ${evicting}. Set maxmemory-policy noeviction on it, or accept the loss with --redis-allow-eviction.`)
  }
  started = true
  return connected
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

/** A connection to Redis or a cluster: commands and scripts, failures as {@link StorageUnavailableError}. */
export class RedisLink {
  readonly target: RedisTarget
  readonly #open: () => Connection
  readonly #warn: (message: string) => void
  readonly #renewAfterMs: number | undefined
  /** Which failures count towards a renewal: any, or only commands sent and never answered. */
  readonly #renewOn: 'any' | 'unanswered'
  /** Since when commands have gone unanswered (with `renewOn: 'unanswered'`), or undefined. */
  #unansweredSince: number | undefined
  readonly #commandTimeoutMs: number
  readonly #allowEviction: boolean
  #connection: Connection
  #failing: string | undefined
  /** Why scripts are refused: the Redis met on reconnecting may evict keys (see {@link checkEviction}). */
  #evicting: string | undefined
  /** The policy must be read before the next command: Redis failed (it may come back another, or reconfigured). */
  #checkDue = false
  /** The policy read in flight, which every command waits for. */
  #checking: Promise<void> | undefined
  /** When the policy was last read (ms). */
  // The start reads the policy right after connecting (connectRedis).
  #checkedAt = monotonicNow()
  /** Redis answers again after failing, and its policy has not been read since (the log says which it is). */
  #recoveredUnchecked = false
  #failingSince = 0
  #renewedAt = Number.NEGATIVE_INFINITY
  /** Redis's clock less this process's monotonic clock (ms), at most, and when that reading came: see {@link redisNow}. */
  #clock: { offset: number; at: number } | undefined
  /** When Redis's clock was last read (monotonic ms). */
  #clockReadAt = Number.NEGATIVE_INFINITY
  /** On a cluster: the clock of the master holding each hash tag (`{tenant}`) written lately, read through that tag's slot (see {@link redisNow}). */
  readonly #tagClocks = new Map<string, { offset: number; at: number }>()
  /** The reading of Redis's clock in flight, shared. */
  #clockReading: Promise<void> | undefined

  constructor(
    target: RedisTarget,
    open: () => Connection,
    warn: (message: string) => void,
    options: { renewAfterMs?: number | undefined; renewOn?: 'any' | 'unanswered' | undefined; commandTimeoutMs?: number | undefined; allowEviction?: boolean | undefined } = {},
  ) {
    this.target = target
    this.#allowEviction = options.allowEviction ?? false
    this.#open = open
    this.#warn = warn
    this.#renewAfterMs = options.renewAfterMs
    this.#renewOn = options.renewOn ?? 'any'
    this.#commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS
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

  /** Runs one command; `firstKey` routes it to its slot's master in a cluster. */
  async call(firstKey: string | undefined, args: string[]): Promise<Reply> {
    let reply: Reply
    try {
      await this.#policyRead()
      reply = await this.#connection.send(firstKey, args, this.#timeLeft())
    } catch (error) {
      throw this.#failure(error)
    }
    this.recovered()
    return reply
  }

  /**
   * Runs a Lua script on `keys` (all of one tenant: one slot). An error the script raised on
   * purpose comes back as a {@link RedisScriptRefusal} carrying its message.
   */
  async script(script: RedisScript, keys: readonly string[], args: readonly (string | number)[]): Promise<Reply> {
    try {
      await this.#policyRead()
    } catch (error) {
      // Not sent: a plain failure, never an unknown outcome.
      throw this.#failure(error)
    }
    if (this.#evicting !== undefined) {
      // @note Redis answered the policy read since it last failed (else #policyRead throws): say
      // so, still refused, even when every command a request sends is a script (issue 21's
      // scenario read is one), as a plain command answered would.
      this.recovered()
      throw new StorageUnavailableError(`Redis at ${this.target.display}: ${this.#evicting}`)
    }
    const tail = [String(keys.length), ...keys, ...args.map(String)]
    let reply: Reply
    try {
      try {
        reply = await this.#connection.send(keys[0], ['EVALSHA', script.sha, ...tail], this.#timeLeft())
      } catch (error) {
        if (!messageOf(error).startsWith('NOSCRIPT')) throw error
        // Redis does not know the script yet (first use, or after a restart): send its text once.
        reply = await this.#connection.send(keys[0], ['EVAL', script.source, ...tail], this.#timeLeft())
      }
    } catch (error) {
      const refusal = /^(?:ERR )?(?:Error running script.*?: )?(NOSEED|IDSPACE|LIMIT|VOID|LATE|BUDGET|KEPT|FULL|BOOK)\b/.exec(messageOf(error))
      if (refusal) throw new RedisScriptRefusal(refusal[1])
      const failure = this.#failure(error)
      // A reply from Redis (an error reply: LOADING, READONLY, …) or a refusal to send is an
      // outcome; only a script sent and never answered may have run unseen.
      if (error instanceof NotSent || error instanceof RequestTimeUp || error instanceof ErrorReplied) throw failure
      throw new RedisOutcomeUnknown(failure.message, { cause: error })
    }
    this.recovered()
    return reply
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
    const tag = /\{[^}]*\}/.exec(key)?.[0] ?? key
    const kept = this.#tagClocks.get(tag)
    if (kept !== undefined && monotonicNow() - kept.at < CLOCK_KEEP_MS) return kept
    let reply: Reply
    try {
      reply = await this.#connection.send(key, ['TIME'], this.#timeLeft())
    } catch (error) {
      throw this.#failure(error)
    }
    const came = monotonicNow()
    this.recovered()
    const clock = { offset: Number((reply as string[])[0]) * 1000 + Math.floor(Number((reply as string[])[1]) / 1000) - came, at: came }
    this.#tagClocks.delete(tag)
    this.#tagClocks.set(tag, clock)
    // The oldest go first: a map as long as the tenants written within a few seconds, at most.
    for (const [old, reading] of this.#tagClocks) {
      if (this.#tagClocks.size <= TAG_CLOCKS && came - reading.at < CLOCK_KEEP_MS) break
      this.#tagClocks.delete(old)
    }
    return clock
  }

  /** Reads Redis's clock (every master's): keeps the reading unless the one kept is tighter and recent. */
  #readClock(): Promise<void> {
    this.#clockReading ??= (async () => {
      this.#clockReadAt = monotonicNow()
      let replies: Reply[]
      try {
        replies = await this.#connection.each(['TIME'], this.#timeLeft())
      } catch (error) {
        throw this.#failure(error)
      }
      const came = monotonicNow()
      this.recovered()
      // Each master read its clock before its answer came: its time then was that, or more.
      const offset = Math.min(...replies.map((reply) => Number((reply as string[])[0]) * 1000 + Math.floor(Number((reply as string[])[1]) / 1000))) - came
      if (this.#clock === undefined || offset > this.#clock.offset || came - this.#clock.at >= CLOCK_KEEP_MS) this.#clock = { offset, at: came }
    })().finally(() => {
      this.#clockReading = undefined
    })
    return this.#clockReading
  }

  /**
   * Whether Redis (every master of a cluster) answers a PING now, within the command timeout, and
   * (once a Redis that may evict was met) whether it still may.
   */
  async ping(): Promise<{ ok: boolean; detail?: string }> {
    try {
      await this.#connection.each(['PING'], this.#timeLeft())
      if (this.#evicting !== undefined || this.#checkDue) await this.#sharedRecheck()
    } catch (error) {
      return { ok: false, detail: this.#failure(error).message }
    }
    this.recovered()
    return this.#evicting === undefined ? { ok: true } : { ok: false, detail: `Redis at ${this.target.display}: ${this.#evicting}` }
  }

  /**
   * Why this Redis may lose tenant data by eviction, or undefined when it cannot (or the operator
   * accepted it): every server holding data is asked its `maxmemory-policy`, by `CONFIG GET`, or
   * by `INFO memory` where CONFIG is disabled or renamed (managed Redis). Any policy but
   * `noeviction` may evict tenant keys, `volatile-*` included: every tenant key has a TTL.
   */
  async checkEviction(): Promise<string | undefined> {
    if (this.#allowEviction) return undefined
    const ms = this.#timeLeft()
    let policies: string[]
    try {
      const replies = await this.#connection.each(['CONFIG', 'GET', 'maxmemory-policy'], ms)
      policies = replies.map((reply) => String((reply as unknown[])[1]))
    } catch (error) {
      if (!(error instanceof ErrorReplied)) throw error
      const replies = await this.#connection.each(['INFO', 'memory'], ms)
      policies = replies.map((reply) => /^maxmemory_policy:(\S+)/m.exec(String(reply))?.[1] ?? 'unknown')
    }
    const evicting = policies.find((policy) => policy !== 'noeviction')
    return evicting === undefined ? undefined : `its maxmemory-policy is ${evicting}, which may evict tenant keys (acknowledged writes lost)`
  }

  /**
   * What every command waits for first: the policy read after Redis failed (so that no read or
   * write is served by a Redis that came back evicting before it is known), and, while the policy
   * refuses, a read again at most every {@link EVICTION_RECHECK_MS} (so that requests themselves
   * find it fixed). One read at a time, shared by every command that waits.
   */
  async #policyRead(): Promise<void> {
    if (this.#allowEviction) return
    if (this.#checking !== undefined) return this.#checking
    if (this.#checkDue || (this.#evicting !== undefined && monotonicNow() - this.#checkedAt >= EVICTION_RECHECK_MS)) return this.#sharedRecheck()
    // @note A policy changed on a Redis that never failed (`CONFIG SET maxmemory-policy`) is found
    // by a read in the background at most every EVICTION_RECHECK_MS, which no command waits for:
    // writes are refused within about a second of the change (re-attack: never, before).
    if (monotonicNow() - this.#checkedAt >= EVICTION_RECHECK_MS) this.#sharedRecheck().catch(() => undefined)
  }

  /** The policy read in flight, or a new one. */
  #sharedRecheck(): Promise<void> {
    this.#checking ??= this.#recheck().finally(() => {
      this.#checking = undefined
    })
    return this.#checking
  }

  /** Reads the eviction policy again (a Redis met on reconnecting, or one refused until fixed). */
  async #recheck(): Promise<void> {
    this.#checkDue = false
    this.#checkedAt = monotonicNow()
    let evicting: string | undefined
    try {
      evicting = await this.checkEviction()
    } catch (error) {
      this.#checkDue = true
      throw error
    }
    // @note Said again when a Redis met after a failure still evicts: the "recovered" line just
    // before it would otherwise read as service back (new-user trial).
    if (evicting !== undefined && (this.#evicting === undefined || this.#recoveredUnchecked)) this.#warn(`storage refused: Redis at ${this.target.display}: ${evicting}; answering 503 storage_unavailable to requests that use Redis until it is set to noeviction (or start with --redis-allow-eviction)`)
    else if (evicting === undefined && this.#evicting !== undefined) this.#warn(`storage accepted: Redis at ${this.target.display} no longer evicts keys`)
    this.#evicting = evicting
    this.#recoveredUnchecked = false
  }

  /** @internal the client's error events and failed commands */
  failed(error: unknown): StorageUnavailableError {
    return this.#failure(error, false)
  }

  /** @internal the client answering again */
  recovered(): void {
    if (this.#failing === undefined) return
    this.#failing = undefined
    this.#unansweredSince = undefined
    if (this.#allowEviction) this.#warn(`storage recovered: Redis at ${this.target.display} answers again`)
    else if (this.#checkDue || this.#checking !== undefined) {
      // The policy read to come says whether it serves (refused again, or accepted).
      this.#recoveredUnchecked = true
      this.#warn(`storage recovered: Redis at ${this.target.display} answers again (its eviction policy is read before it serves)`)
    } else if (this.#evicting !== undefined) this.#warn(`storage recovered: Redis at ${this.target.display} answers again, but is still refused: ${this.#evicting}`)
    else this.#warn(`storage recovered: Redis at ${this.target.display} answers again`)
    // It may be another Redis, or the same one restarted with another configuration: read its
    // policy now (commands wait for it; #failure marked it due).
    if (!this.#allowEviction) this.#sharedRecheck().catch(() => undefined)
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

  close(): Promise<void> {
    this.#connection.close()
    return Promise.resolve()
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
  #failure(error: unknown, unanswered = true): StorageUnavailableError {
    if (error instanceof RequestTimeUp) return error
    const detail = `Redis at ${this.target.display}: ${messageOf(error)}`
    const now = monotonicNow()
    // Whatever answers next may be another Redis, or this one restarted with another policy.
    this.#checkDue = true
    if (this.#failing === undefined) {
      this.#warn(`storage failing: ${detail}; answering 503 storage_unavailable until it recovers`)
      this.#failingSince = now
    }
    this.#failing = detail
    // Unanswered: sent (or read for) and no reply; not a refusal to send, nor an error Redis replied.
    if (unanswered && !(error instanceof NotSent) && !(error instanceof ErrorReplied)) this.#unansweredSince ??= now
    const since = this.#renewOn === 'any' ? this.#failingSince : this.#unansweredSince
    const renewAfter = this.#renewAfterMs
    if (renewAfter !== undefined && since !== undefined && now - since >= renewAfter && now - this.#renewedAt >= renewAfter) this.#renew(now)
    return new StorageUnavailableError(detail, { cause: error })
  }

  /** Replaces the client by a fresh one; the old one's pending commands fail (nobody waits for them). */
  #renew(now: number): void {
    this.#renewedAt = now
    const old = this.#connection
    const fresh = this.#open()
    fresh.connecting.catch(() => undefined)
    fresh.adopt()
    this.#connection = fresh
    this.#warn(`storage still failing after ${Math.round((now - this.#failingSince) / 1000)} s: reconnecting to Redis at ${this.target.display} with a new client`)
    old.close()
  }
}
