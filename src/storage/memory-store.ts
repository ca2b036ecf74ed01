/**
 * The in-memory {@link TenantStore}: one tenant's categories in an @msw/data collection, plus the
 * id counter. The library, the browser and the server without `--data-dir` use it. Every
 * operation runs through a serial queue, so a reset never interleaves with a create and
 * concurrent creates get distinct, increasing ids in the order they arrived.
 */
import { Collection } from '@msw/data'
import type { Scenario } from '../contract/scenario-format.js'
import { StoredCategory, type Category, type NewCategory } from '../contract/schemas.js'
import { monotonicNow } from '../core/clock.js'
import { heapWeight, type HeldBytesMeter } from '../core/heap-weight.js'
import { beyondLatin1, categoryJsonUnits, jsonTextBytes } from '../core/json-text.js'
import { CategoryLimitError, IdSpaceExhaustedError, toCategory, type TenantState, type TenantStore } from './storage.js'

export { CategoryLimitError, IdSpaceExhaustedError } from './storage.js'

/** The writable part of a store, as the browser's session persistence saves it. */
export interface StoreSnapshot {
  readonly categories: readonly Category[]
  /** The id the next created category gets. */
  readonly nextCategoryId: number
}

/**
 * How many records a seed writes before it lets other work run.
 * @note Seeding `large-catalog` (10,000 categories) in one go held the event loop for ~300 ms,
 * stalling every other tenant of the server; in chunks, their requests run in between.
 */
const SEED_CHUNK = 250

const yieldToOthers = (): Promise<void> =>
  new Promise((resolve) => (typeof setImmediate === 'function' ? setImmediate(resolve) : setTimeout(resolve, 0)))

/**
 * A new, empty collection of categories (typed without the length limits of requests, so that
 * saved and seeded data is never judged by them).
 * @note Cheaper than `clear()`, which deletes records one by one: emptying 10,000 held the event
 * loop for ~150 ms. The collection has no relations or extensions, so nothing else refers to it.
 */
const emptyCollection = () => new Collection({ schema: StoredCategory })

export class PetstoreStore implements TenantStore {
  /**
   * Called inside the write's queue slot after every replace, create and restore, with the
   * state it left. Lets a runtime persist the store without knowing its rules (the browser's
   * sessionStorage). It must not throw: an exception fails the write it follows.
   */
  onWrite: ((snapshot: StoreSnapshot) => void) | undefined
  /** Called when the store first holds more than its default seed (see {@link modified}). */
  onModified: (() => void) | undefined
  /** Told of every change to {@link heldBytes}. */
  meter: HeldBytesMeter | undefined
  #categories = emptyCollection()
  /** The storage's default seed, as last given: a store that holds it (the very state) is not {@link modified}. */
  #defaultSeed: TenantState
  /** The state its last replace laid (what it holds while it is not {@link modified}). */
  #laid: TenantState | undefined
  #scenario: string
  #nextCategoryId = 1
  #modified = false
  #heldBytes = 0
  #updatedAt = Date.now()
  /** {@link updatedAt} on the monotonic clock: what idle expiry measures. */
  #usedAt = monotonicNow()
  #tail: Promise<unknown> = Promise.resolve()
  /**
   * The list's JSON text, serialised on the first read after a write and kept until the next
   * write: reads between writes (most requests) send it as it is.
   */
  #listText: string | undefined
  /** The units of that text (made or not): `[`, `]` and each category's ({@link categoryJsonUnits}). */
  #listTextUnits = 2
  /** Whether that text holds a character above Latin-1 (two bytes a unit). */
  #listTextTwoByte = false
  /** Settles when the first seed is in. */
  readonly seeded: Promise<void>

  /** Starts on `seed`, the storage's default: a store that still holds it is not {@link modified}. */
  constructor(seed: TenantState) {
    this.#defaultSeed = seed
    this.#scenario = seed.scenario
    this.seeded = this.replace(seed)
    this.seeded.catch(() => undefined)
  }

  /** Runs `task` after every task queued before it; a failed task does not block later ones. */
  #serial<T>(task: () => T | Promise<T>): Promise<T> {
    const run = this.#tail.then(task, task)
    this.#tail = run.catch(() => undefined)
    return run
  }

  scenario(): Promise<string> {
    return this.#serial(() => this.#scenario)
  }

  replace(state: TenantState): Promise<void> {
    return this.#serial(() => this.#replace(state))
  }

  /**
   * Onto a new version of its default seed (the scenario file was reloaded), unless it holds
   * writes when its turn in the queue comes: resolves to whether it did.
   * @note Judged in the queue, so a create queued first is never wiped by the reload.
   */
  reseed(seed: TenantState): Promise<boolean> {
    return this.#serial(async () => {
      // The new default from now on, for a reset onto it too (a store holding writes keeps them meanwhile).
      // @note In the queue: set at once, the store's first seed (or a reset onto the old one) still queued was then
      // taken for a write, and the store kept the old seed as a writer for good (attack52 F1).
      this.#defaultSeed = seed
      if (this.#modified) return false
      // Laid already (a tenant reseeded at its next request, then released and opened again): not built twice.
      if (this.#laid === seed) return true
      await this.#replace(seed)
      return true
    })
  }

  /** Takes `seed` as its default from its turn in the queue on, holding what it holds (laid by a later {@link reseed}). */
  adoptSeed(seed: TenantState): void {
    void this.#serial(() => {
      this.#defaultSeed = seed
    })
  }

  async #replace(state: TenantState): Promise<void> {
    this.#forgetListText()
    this.#categories = emptyCollection()
    // @note Counted before the chunked writes below, which let other work run: a memory budget
    // must see what a switch is about to hold, or many switches in flight would all pass it.
    this.#holdAll(state.categories)
    let written = 0
    for (const category of state.categories) {
      await this.#categories.create(toCategory(category))
      if (++written % SEED_CHUNK === 0) await yieldToOthers()
    }
    this.#scenario = state.scenario
    this.#nextCategoryId = state.nextCategoryId
    // @note By the very seed, as SQLite judges it: by its scenario's name, a tenant switched to a newer version of the
    // start scenario (its file edited) was taken for one on its seed, evicted as losing nothing and back on the start's
    // version, torn (attack47 F5).
    this.#setModified(state !== this.#defaultSeed)
    this.#laid = state
    this.#wrote()
  }

  /** The categories and the next id, as plain objects. */
  snapshot(): Promise<StoreSnapshot> {
    return this.#serial(() => this.#snapshot())
  }

  /**
   * Replaces the categories and the next id with a snapshot's, keeping the scenario.
   * @note The snapshot is trusted: callers read it back from their own storage and check its shape.
   */
  restore(snapshot: StoreSnapshot): Promise<void> {
    return this.#serial(async () => {
      this.#forgetListText()
      this.#categories = emptyCollection()
      for (const category of snapshot.categories) await this.#categories.create(toCategory(category))
      this.#nextCategoryId = snapshot.nextCategoryId
      this.#holdAll(snapshot.categories)
      this.#setModified(true)
      this.#wrote()
    })
  }

  /** Counts `categories` as all it holds (a replace, a restore): their weight and their list's text. */
  #holdAll(categories: readonly Category[]): void {
    let units = 2
    let twoByte = false
    for (const category of categories) {
      units += categoryJsonUnits(category)
      twoByte ||= beyondLatin1(category)
    }
    this.#hold(categoriesWeight(categories), units, twoByte)
  }

  /**
   * Sets what the categories hold and what their list's JSON text takes (`textUnits`, `twoByte`),
   * and tells the meter the difference.
   * @note The text counts from the write on, made or not: made on a read, it was counted only
   * once it existed, and a tenant of 44 MB by its categories' estimate (20,000 names and
   * descriptions of control characters, six units each as JSON) made a 264 MB text on its next
   * read: one or two reads aborted the process, heap out of memory (attack12 M1). Counted at the
   * write, the budget refuses the write that would leave no room for its list's text.
   */
  #hold(categoriesBytes: number, textUnits: number, twoByte: boolean): void {
    const before = this.heldBytes
    this.#heldBytes = categoriesBytes
    this.#listTextUnits = textUnits
    this.#listTextTwoByte = twoByte
    const delta = this.heldBytes - before
    if (delta !== 0) this.meter?.add(delta)
  }

  #setModified(modified: boolean): void {
    const became = modified && !this.#modified
    this.#modified = modified
    if (became) this.onModified?.()
  }

  #snapshot(): StoreSnapshot {
    return { categories: this.#categories.all().map(toCategory), nextCategoryId: this.#nextCategoryId }
  }

  #forgetListText(): void {
    this.#listText = undefined
  }

  #wrote(): void {
    this.#forgetListText()
    this.#updatedAt = Date.now()
    this.#usedAt = monotonicNow()
    this.onWrite?.(this.#snapshot())
  }

  listCategories(): Promise<Category[]> {
    return this.#serial(() => this.#categories.all().map(toCategory))
  }

  /** The list as its answer's JSON text: serialised once per write, not once per read. */
  listCategoriesJson(): Promise<string> {
    return this.#serial(() => {
      if (this.#listText === undefined) {
        this.#listText = JSON.stringify(this.#categories.all().map(toCategory))
      }
      return this.#listText
    })
  }

  countCategories(): Promise<number> {
    return this.#serial(() => this.#categories.count())
  }

  get modified(): boolean {
    return this.#modified
  }

  /** When it last wrote or was touched (ms since the epoch). */
  get updatedAt(): number {
    return this.#updatedAt
  }

  /** When it last wrote or was touched, on the {@link monotonicNow | monotonic clock} (idle expiry measures from it). */
  get usedAt(): number {
    return this.#usedAt
  }

  /** Marks it used now (idle expiry counts from its last use). */
  touch(): void {
    this.#updatedAt = Date.now()
    this.#usedAt = monotonicNow()
  }

  /** The scenario it was on after its last completed write, without waiting for the queue. */
  get scenarioName(): string {
    return this.#scenario
  }

  /** How many categories are stored now (no queue: a cheap figure for summaries). */
  get categoryCount(): number {
    return this.#categories.count()
  }

  /**
   * What the categories hold on the heap, estimated: about 360 bytes of collection overhead per
   * category (measured by `npm run bench -- scale`) plus its strings, and their list's JSON text
   * (made on the first read after a write, counted from the write).
   */
  get heldBytes(): number {
    return this.#heldBytes + jsonTextBytes(this.#listTextUnits, this.#listTextTwoByte)
  }

  heldBytesFor(scenario: Scenario): number {
    return scenarioHeldBytes(scenario)
  }

  createCategory(input: NewCategory, maxCategories = Number.POSITIVE_INFINITY): Promise<Category> {
    return this.#serial(async () => {
      if (this.#categories.count() >= maxCategories) throw new CategoryLimitError(maxCategories)
      this.#forgetListText()
      const id = this.#nextCategoryId
      if (!Number.isSafeInteger(id)) {
        throw new IdSpaceExhaustedError(`the next category id (${id}) is not a safe integer`)
      }
      this.#nextCategoryId = id + 1
      const record = await this.#categories.create(
        input.description === undefined
          ? { id, name: input.name }
          : { id, name: input.name, description: input.description },
      )
      this.#setModified(true)
      this.#hold(this.#heldBytes + categoryWeight(record), this.#listTextUnits + categoryJsonUnits(record), this.#listTextTwoByte || beyondLatin1(record))
      this.#wrote()
      return toCategory(record)
    })
  }
}

/**
 * Heap per stored category beyond its own fields, as `bench/scale.ts` measures the built package:
 * 423 bytes a category, of which 80 its two strings. @msw/data keeps the record, its UUID
 * (`core/random-uuid.ts`) and a `Map` for relations.
 * @note It was 860 while @msw/data's UUIDs were Node's own, a rope of ~450 bytes each.
 */
const CATEGORY_OVERHEAD = 360

function categoryWeight(category: Category): number {
  return CATEGORY_OVERHEAD + heapWeight(category.name) + (category.description === undefined ? 0 : heapWeight(category.description))
}

const SCENARIO_BYTES = new WeakMap<Scenario, number>()

/**
 * What a store seeded with `scenario` holds on the heap, estimated as {@link PetstoreStore.heldBytes}
 * counts it (its categories and their list's text), without making its categories: a generated
 * seed is weighed by its longest category, times its count.
 */
export function scenarioHeldBytes(scenario: Scenario): number {
  let bytes = SCENARIO_BYTES.get(scenario)
  if (bytes === undefined) {
    const source = scenario.seed.categories
    let weight = 0
    let units = 2
    let twoByte = false
    const add = (category: Category, times: number) => {
      weight += times * categoryWeight(category)
      units += times * categoryJsonUnits(category)
      twoByte ||= beyondLatin1(category)
    }
    if ('generate' in source) {
      const { count, name, description } = source.generate
      const n = String(count)
      if (count > 0) add(description === undefined ? { id: count, name: name.replaceAll('{n}', n) } : { id: count, name: name.replaceAll('{n}', n), description: description.replaceAll('{n}', n) }, count)
    } else {
      for (const seed of source) add(seed.description === undefined ? { id: seed.id ?? source.length, name: seed.name } : { id: seed.id ?? source.length, name: seed.name, description: seed.description }, 1)
    }
    bytes = weight + jsonTextBytes(units, twoByte)
    SCENARIO_BYTES.set(scenario, bytes)
  }
  return bytes
}

function categoriesWeight(categories: readonly Category[]): number {
  let total = 0
  for (const category of categories) total += categoryWeight(category)
  return total
}
