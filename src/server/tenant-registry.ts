/**
 * The standalone server's tenants: one isolated {@link Tenant} per accepted API key, created on
 * its first request and seeded from the active scenario. Tenants are named by a short hash of
 * their key, so that ids can be listed, logged and passed around without exposing the key.
 */
import { createHash } from 'node:crypto'
import { constantTimeEqual, KeyRing } from '../core/auth.js'
import { Tenant, type TenantOverrides } from '../core/tenant.js'
import type { TenantResolver } from '../handlers/pipeline.js'
import type { Scenario } from '../scenario/scenario-format.js'
import type { DurableTenants } from './durable-tenants.js'

/** The key accepted when none is configured: documented, printed at start, never secret. */
export const DEV_API_KEY = 'sandbox-dev-key'

/** @default 1000 tenants kept before the least recently used one is evicted */
export const DEFAULT_MAX_TENANTS = 1000

/** Options of {@link TenantRegistry}. */
export interface TenantRegistryOptions {
  /** The scenario new tenants are seeded from. */
  readonly scenario: Scenario
  /** Accepted keys, or `'any'` for every non-empty key (each its own tenant). */
  readonly keys: readonly string[] | 'any'
  /** The admin token: never accepted as an API key. */
  readonly adminToken?: string | undefined
  /** At most this many tenants are kept; the least recently used is evicted. */
  readonly maxTenants: number
  readonly overrides: TenantOverrides
  /** Where tenants' state is kept across restarts (`--data-dir`). @default none: in memory only */
  readonly durable?: DurableTenants | undefined
  /** A scenario by name, for tenants whose saved state names one. */
  readonly scenarioNamed?: ((name: string) => Scenario | undefined) | undefined
  /** Throws when there is no room for a new tenant (the memory budget). @default always room */
  readonly admit?: ((work: 'grow') => void) | undefined
}

/**
 * The id of the tenant a key opens: the first 12 hex digits of its SHA-256.
 * @example tenantId('sandbox-dev-key') // a 12-character hex string
 */
export function tenantId(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12)
}

const encoder = new TextEncoder()

export class TenantRegistry implements TenantResolver {
  readonly #options: TenantRegistryOptions
  readonly #keys: KeyRing
  readonly #adminToken: Uint8Array | undefined
  /** Ids of the configured keys, so the admin token can name tenants before their first request. */
  readonly #configuredIds: ReadonlySet<string>
  /** @note A Map iterates in insertion order: re-inserting on use makes its first entry the LRU. */
  readonly #tenants = new Map<string, Tenant>()
  #evictions = 0

  constructor(options: TenantRegistryOptions) {
    this.#options = options
    this.#keys = new KeyRing(options.keys)
    this.#adminToken = options.adminToken === undefined ? undefined : encoder.encode(options.adminToken)
    this.#configuredIds = new Set(options.keys === 'any' ? [] : options.keys.map(tenantId))
  }

  /** The tenant of an accepted key, created (and seeded) on first use. */
  resolve(token: string): Tenant | undefined {
    return this.accepts(token) ? this.#use(tenantId(token)) : undefined
  }

  /** Whether `token` is an accepted API key (the admin token never is). */
  accepts(token: string): boolean {
    return !this.isAdminToken(token) && this.#keys.accepts(token)
  }

  /** Whether `token` is the admin token, compared in constant time. */
  isAdminToken(token: string): boolean {
    return this.#adminToken !== undefined && constantTimeEqual(encoder.encode(token), this.#adminToken) === 1
  }

  /** The tenant with this id: an existing one, or a configured key's (created on demand). */
  find(id: string): Tenant | undefined {
    return this.#tenants.has(id) || this.#configuredIds.has(id) ? this.#use(id) : undefined
  }

  /** Ids of the live tenants and of every configured key, least recently used first. */
  ids(): string[] {
    return [...new Set([...this.#tenants.keys(), ...this.#configuredIds])]
  }

  /** The scenario new tenants start from. */
  get scenario(): Scenario {
    return this.#options.scenario
  }

  get acceptsAnyKey(): boolean {
    return this.#keys.acceptsAny
  }

  get size(): number {
    return this.#tenants.size
  }

  /** What the live tenants hold on the heap together, estimated (see {@link Tenant.heldBytes}). */
  heldBytes(): number {
    let total = 0
    for (const tenant of this.#tenants.values()) total += tenant.heldBytes
    return total
  }

  /** How many tenants were evicted to stay under the cap since start. */
  get evictions(): number {
    return this.#evictions
  }

  #use(id: string): Tenant {
    let tenant = this.#tenants.get(id)
    if (tenant) {
      this.#tenants.delete(id)
    } else {
      this.#options.admit?.('grow')
      tenant = this.#create(id)
      while (this.#tenants.size >= this.#options.maxTenants) {
        const oldest = this.#tenants.keys().next().value
        if (oldest === undefined) break
        this.#tenants.delete(oldest)
        this.#options.durable?.release(oldest)
        this.#evictions++
      }
    }
    this.#tenants.set(id, tenant)
    return tenant
  }

  /** A new tenant: from its saved state when the sandbox is durable, else from the scenario. */
  #create(id: string): Tenant {
    const { durable, overrides } = this.#options
    if (!durable) return new Tenant(this.#options.scenario, overrides)
    const loaded = durable.load(id)
    const scenario = (loaded.scenario === undefined ? undefined : this.#options.scenarioNamed?.(loaded.scenario)) ?? this.#options.scenario
    return new Tenant(scenario, overrides, durable.durability(id, loaded))
  }
}
