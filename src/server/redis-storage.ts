/**
 * The Redis {@link TenantStorage} behind `--redis-url`: every tenant in Redis (or a Redis
 * Cluster), so that any number of sandbox processes serve every tenant identically. See
 * docs/decisions/0005-redis-replicas.md for the key layout and why each write is atomic.
 *
 * Keys (`P` is the prefix, `petstore-sandbox:` by default; `{id}` is a Redis Cluster hash tag, so
 * all of one tenant's keys live in one slot and one script may touch them all):
 * - `P{id}:meta` hash: `scenario`, `next` (the next category id), `updated` (last write, ms),
 *   `used` (last request, ms): exists only once the tenant has written; without it the tenant is
 *   on the default seed;
 * - `P{id}:cats` list: the categories as JSON, in creation order;
 * - `P{id}:journal`, `P{id}:jsizes`, `P{id}:jmeta`: the journal (`redis-journal.ts`);
 * - `Ptenants` sorted set: the tenant registry, id → last write (ms).
 *
 * Every write is one Lua script on one tenant's keys: Redis runs a script alone, so a create's id
 * (read and advanced in the script) is unique across replicas, and a reset replaces categories,
 * next id and scenario at once. A write is answered once Redis has run it.
 */
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
} from '../core/storage.js'
import { connectRedis, RedisScriptRefusal, redisScript, type RedisLink } from './redis-connection.js'
import { RedisJournal } from './redis-journal.js'

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
}

/** How many categories one RPUSH sends from inside a script (Lua's `unpack` has a limit). */
const PUSH_CHUNK = 1000

/** Lua: renews the TTL of both of a tenant's keys to ARGV[`arg`] ms (0: they never expire). */
const renewTtl = (arg: number) => `local ttl = tonumber(ARGV[${arg}])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end`

/**
 * Writes a tenant's whole state. ARGV: mode (`init`: only when the tenant has none yet;
 * `replace`; `default`: back on the default seed, so its keys go), scenario, next id, now,
 * ttl ms, then the categories as JSON.
 */
const WRITE_STATE = redisScript(`
if ARGV[1] == 'init' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
if ARGV[1] == 'default' then return 0 end
for i = 6, #ARGV, ${PUSH_CHUNK} do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + ${PUSH_CHUNK - 1}, #ARGV)))
end
redis.call('HSET', KEYS[1], 'scenario', ARGV[2], 'next', ARGV[3], 'updated', ARGV[4])
${renewTtl(5)}
return 1
`)

/**
 * Creates a category under the tenant's next id. ARGV: the category's JSON after its `{`,
 * prefixed with a comma; now; ttl ms; the most categories the tenant may hold (-1: no limit).
 * Refuses with NOSEED when the tenant has no state yet (the caller writes its seed with `init`,
 * then retries), IDSPACE past the safe integers and LIMIT at the category limit.
 */
const CREATE = redisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOSEED') end
local id = tonumber(redis.call('HGET', KEYS[1], 'next'))
if id > 9007199254740991 then return redis.error_reply('IDSPACE') end
local max = tonumber(ARGV[4])
if max >= 0 and redis.call('LLEN', KEYS[2]) >= max then return redis.error_reply('LIMIT') end
redis.call('HSET', KEYS[1], 'next', string.format('%d', id + 1), 'updated', ARGV[2])
redis.call('RPUSH', KEYS[2], '{"id":' .. string.format('%d', id) .. ARGV[1])
${renewTtl(3)}
return string.format('%d', id)
`)

/** Records a use of a tenant that has state (its last use, and its keys' TTL renewed). ARGV: now; ttl ms. */
const TOUCH = redisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'used', ARGV[1])
${renewTtl(2)}
return 1
`)

/** Reads a tenant: nil when it has no state (default seed), else its scenario and categories (ARGV[1] `list`) or their count. */
const READ = redisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[1] == 'count' then return {redis.call('HGET', KEYS[1], 'scenario'), redis.call('LLEN', KEYS[2])} end
return {redis.call('HGET', KEYS[1], 'scenario'), redis.call('LRANGE', KEYS[2], 0, -1)}
`)

/**
 * Deletes a tenant's keys (ARGV[1]: only when its last write and last use are older than this, or
 * `any`); 1 when it had state.
 */
const DELETE = redisScript(`
local updated = redis.call('HGET', KEYS[1], 'updated')
local used = redis.call('HGET', KEYS[1], 'used')
if ARGV[1] ~= 'any' and updated and math.max(tonumber(updated), tonumber(used or 0)) >= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', unpack(KEYS))
if updated then return 1 end
return 0
`)

/** The keys of one tenant, all with its hash tag. */
export interface TenantKeys {
  readonly meta: string
  readonly categories: string
  readonly journal: string
  readonly journalSizes: string
  readonly journalMeta: string
}

/**
 * Connects to Redis and returns the storage. Refuses with a `PetstoreError` when `redis` is not
 * installed, the URL is bad, or Redis does not answer.
 */
export async function openRedisStorage(options: RedisStorageOptions): Promise<RedisStorage> {
  const link = await connectRedis({ url: options.url, commandTimeoutMs: options.commandTimeoutMs, warn: options.warn, unreachableAtStart: options.unreachableAtStart })
  return new RedisStorage(link, options)
}

export class RedisStorage implements TenantStorage {
  readonly kind = 'redis'
  readonly durable = true
  readonly shared = true
  readonly link: RedisLink
  readonly seed: TenantState
  readonly ttlMs: number
  readonly prefix: string
  readonly #journalBytes: number
  readonly #registry: string
  readonly #seedJson: string[]

  constructor(link: RedisLink, options: RedisStorageOptions) {
    this.link = link
    this.seed = options.seed
    this.ttlMs = Math.max(0, Math.round(options.ttlMs ?? 0))
    this.prefix = options.prefix ?? DEFAULT_REDIS_PREFIX
    this.#journalBytes = options.journalBytes ?? DEFAULT_JOURNAL_BYTES
    this.#registry = `${this.prefix}tenants`
    this.#seedJson = options.seed.categories.map((category) => JSON.stringify(toCategory(category)))
  }

  /** The keys of a tenant. */
  keys(id: string): TenantKeys {
    const base = `${this.prefix}{${id}}:`
    return { meta: `${base}meta`, categories: `${base}cats`, journal: `${base}journal`, journalSizes: `${base}jsizes`, journalMeta: `${base}jmeta` }
  }

  open(id: string): TenantStore {
    return new RedisTenantStore(this, id)
  }

  journal(id: string, limit: number | undefined): TenantJournal {
    return new RedisJournal(this.link, this.keys(id), { limit, bytes: this.#journalBytes, ttlMs: this.ttlMs })
  }

  /** Nothing to let go of: every tenant lives in Redis, none in this process. */
  release(_id: string): void {}

  async touch(id: string): Promise<void> {
    const keys = this.keys(id)
    const now = Date.now()
    // The registry (its own slot: a separate command) orders tenants by last use for expire().
    if ((await this.link.script(TOUCH, [keys.meta, keys.categories], [now, this.ttlMs])) === 1) {
      await this.link.call(this.#registry, ['ZADD', this.#registry, 'XX', String(now), id])
    }
  }

  async has(id: string): Promise<boolean> {
    return (await this.link.call(this.keys(id).meta, ['EXISTS', this.keys(id).meta])) === 1
  }

  async list(): Promise<TenantSummary[]> {
    const flat = (await this.link.call(this.#registry, ['ZRANGE', this.#registry, '0', '-1', 'WITHSCORES'])) as string[]
    const entries: { id: string; updatedAt: number }[] = []
    for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ id: flat[i]!, updatedAt: Number(flat[i + 1]) })
    const summaries = await Promise.all(
      entries.map(async ({ id, updatedAt }): Promise<TenantSummary | undefined> => {
        const keys = this.keys(id)
        const reply = (await this.link.script(READ, [keys.meta, keys.categories], ['count'])) as [string, number] | null
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
    await this.link.call(this.#registry, ['ZREM', this.#registry, id])
    return deleted
  }

  async expire(before: number): Promise<string[]> {
    const ids = (await this.link.call(this.#registry, ['ZRANGEBYSCORE', this.#registry, '-inf', `(${before}`])) as string[]
    const expired: string[] = []
    for (const id of ids) {
      // @note The script checks the last write again: a replica may have written since the index was read.
      if (await this.#delete(id, String(before))) {
        expired.push(id)
        await this.link.call(this.#registry, ['ZREM', this.#registry, id])
      } else if (!(await this.has(id))) {
        await this.link.call(this.#registry, ['ZREM', this.#registry, id])
      }
    }
    return expired
  }

  async health(): Promise<StorageHealth> {
    return this.link.ping()
  }

  close(): Promise<void> {
    return this.link.close()
  }

  async #delete(id: string, before: string): Promise<boolean> {
    const keys = this.keys(id)
    const all = [keys.meta, keys.categories, keys.journal, keys.journalSizes, keys.journalMeta]
    return (await this.link.script(DELETE, all, [before])) === 1
  }

  /** @internal The tenant's scenario and categories, or undefined when it is on the default seed. */
  async read(id: string, what: 'list' | 'count'): Promise<[string, string[] | number] | undefined> {
    const keys = this.keys(id)
    const reply = (await this.link.script(READ, [keys.meta, keys.categories], [what])) as [string, string[] | number] | null
    return reply ?? undefined
  }

  /** @internal */
  async scenarioOf(id: string): Promise<string> {
    const meta = this.keys(id).meta
    const name = (await this.link.call(meta, ['HGET', meta, 'scenario'])) as string | null
    return name ?? this.seed.scenario
  }

  /** @internal Writes the default seed for a tenant that has no state yet (nothing when it has). */
  async seedIfNew(id: string): Promise<void> {
    await this.#writeState(id, 'init', this.seed)
  }

  /** @internal Creates a category; writes the default seed first when the tenant has none. */
  async create(id: string, input: NewCategory, maxCategories: number): Promise<Category> {
    const keys = this.keys(id)
    const category = input.description === undefined ? { name: input.name } : { name: input.name, description: input.description }
    const rest = `,${JSON.stringify(category).slice(1)}`
    for (let attempt = 0; ; attempt++) {
      try {
        const limit = Number.isFinite(maxCategories) ? maxCategories : -1
        const reply = await this.link.script(CREATE, [keys.meta, keys.categories], [rest, Date.now(), this.ttlMs, limit])
        await this.#index(id)
        return { id: Number(reply), ...category }
      } catch (error) {
        if (!(error instanceof RedisScriptRefusal)) throw error
        if (error.message === 'IDSPACE') throw new IdSpaceExhaustedError('the next category id is not a safe integer')
        if (error.message === 'LIMIT') throw new CategoryLimitError(maxCategories)
        // NOSEED: the tenant's first write. Its seed goes in (unless another replica's just did).
        if (attempt > 2) throw new StorageUnavailableError(`Redis: tenant ${id} lost its state while being created`)
        await this.#writeState(id, 'init', this.seed)
      }
    }
  }

  /** @internal Replaces a tenant's state; resolves to whether it now has keys. */
  async replace(id: string, state: TenantState): Promise<boolean> {
    const toDefault = state === this.seed
    await this.#writeState(id, toDefault ? 'default' : 'replace', state)
    if (toDefault) await this.link.call(this.#registry, ['ZREM', this.#registry, id])
    else await this.#index(id)
    return !toDefault
  }

  async #writeState(id: string, mode: 'init' | 'replace' | 'default', state: TenantState): Promise<void> {
    const keys = this.keys(id)
    const categories = state === this.seed ? this.#seedJson : state.categories.map((category) => JSON.stringify(toCategory(category)))
    await this.link.script(WRITE_STATE, [keys.meta, keys.categories], [mode, state.scenario, state.nextCategoryId, Date.now(), this.ttlMs, ...categories])
  }

  /** Records the tenant's last write in the registry (its own slot: a separate command). */
  async #index(id: string): Promise<void> {
    await this.link.call(this.#registry, ['ZADD', this.#registry, String(Date.now()), id])
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

  constructor(storage: RedisStorage, id: string) {
    this.#storage = storage
    this.#id = id
  }

  scenario(): Promise<string> {
    return this.#storage.scenarioOf(this.#id)
  }

  async listCategories(): Promise<Category[]> {
    const state = await this.#storage.read(this.#id, 'list')
    if (!state) return this.#storage.seed.categories.map(toCategory)
    return (state[1] as string[]).map(parseCategory)
  }

  async countCategories(): Promise<number> {
    const state = await this.#storage.read(this.#id, 'count')
    return state ? (state[1] as number) : this.#storage.seed.categories.length
  }

  async createCategory(input: NewCategory, maxCategories = Number.POSITIVE_INFINITY): Promise<Category> {
    if (!this.#seeded) {
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
