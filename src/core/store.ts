/**
 * One tenant's data: @msw/data collections typed by the contract's schemas, plus the id counter.
 * Every operation runs through a serial queue, so a reset never interleaves with a create and
 * concurrent creates get distinct, increasing ids in the order they arrived.
 */
import { Collection } from '@msw/data'
import { Order, Pet, StoredCategory, type Category, type NewCategory } from '../contract/schemas.js'
import type { CategorySeed, Scenario } from '../scenario/scenario-format.js'
import { heapWeight } from './heap-weight.js'

/** Thrown when the next id would no longer be a safe integer. */
export class IdSpaceExhaustedError extends Error {
  override readonly name = 'IdSpaceExhaustedError'
}

/** Thrown when a create would take a tenant past its category limit. */
export class CategoryLimitError extends Error {
  override readonly name = 'CategoryLimitError'
  constructor(readonly limit: number) {
    super(`the tenant holds the most categories allowed (${limit})`)
  }
}

/** The writable part of a store: pets and orders are read-only, so their seed restores them. */
export interface StoreSnapshot {
  readonly categories: readonly Category[]
  /** The id the next created category gets. */
  readonly nextCategoryId: number
}

/** A write as a durable runtime records it: one created category, or the whole state replaced. */
export type DurableWrite =
  | { readonly kind: 'created'; readonly category: Category }
  | { readonly kind: 'replaced'; readonly snapshot: StoreSnapshot }

export class PetstoreStore {
  /**
   * Called inside the write's queue slot (so calls arrive in write order) after every seed,
   * create and restore; the write resolves only once the returned promise does. Lets a runtime
   * make each write durable before it is answered, and batch concurrent ones. A rejection fails
   * the write it follows (the state in memory is already changed).
   */
  onDurableWrite: ((write: DurableWrite) => Promise<void> | undefined) | undefined
  /**
   * Called inside the write's queue slot after every seed, create and restore, with the state
   * it left. Lets a runtime persist the store without knowing its rules. It must not throw: an
   * exception fails the write it follows.
   */
  onWrite: ((snapshot: StoreSnapshot) => void) | undefined
  readonly #categories = new Collection({ schema: StoredCategory })
  readonly #pets = new Collection({ schema: Pet })
  readonly #orders = new Collection({ schema: Order })
  #nextCategoryId = 1
  #tail: Promise<unknown> = Promise.resolve()
  #heldBytes = 0
  /**
   * Creates beyond this many categories throw {@link CategoryLimitError}; a seed may hold more.
   * @default Infinity
   */
  maxCategories = Number.POSITIVE_INFINITY

  /** Runs `task` after every task queued before it; a failed task does not block later ones. */
  #serial<T>(task: () => T | Promise<T>): Promise<T> {
    const run = this.#tail.then(task, task)
    this.#tail = run.catch(() => undefined)
    return run
  }

  /**
   * Replaces all data with the scenario's seed and restarts ids after the highest seeded one;
   * with `saved`, categories and the next id come from it instead (a durable runtime's state).
   */
  seed(scenario: Scenario, saved?: StoreSnapshot): Promise<void> {
    return this.#durable(async () => {
      this.#categories.clear()
      this.#pets.clear()
      this.#orders.clear()
      const categories = saved ? saved.categories.map(toCategory) : expandCategories(scenario.seed.categories)
      for (const category of categories) await this.#categories.create(category)
      for (const pet of scenario.seed.pets) await this.#pets.create(structuredClone(pet))
      for (const order of scenario.seed.orders) await this.#orders.create(structuredClone(order))
      this.#nextCategoryId = saved?.nextCategoryId ?? categories.reduce((max, category) => Math.max(max, category.id), 0) + 1
      this.#heldBytes = categoriesWeight(categories) + heapWeight(scenario.seed.pets) + heapWeight(scenario.seed.orders)
      this.#wrote()
      return { result: undefined, write: { kind: 'replaced', snapshot: this.#snapshot() } }
    })
  }

  /** Runs `task` in the queue, then waits for its write to be durable (outside the queue, so writes batch). */
  async #durable<T>(task: () => Promise<{ result: T; write: DurableWrite }>): Promise<T> {
    let durable: Promise<void> | undefined
    const result = await this.#serial(async () => {
      const { result, write } = await task()
      durable = this.onDurableWrite?.(write)
      return result
    })
    await durable
    return result
  }

  /** The categories and the next id, as plain objects. */
  snapshot(): Promise<StoreSnapshot> {
    return this.#serial(() => this.#snapshot())
  }

  /**
   * Replaces the categories and the next id with a snapshot's. Pets and orders are left as seeded.
   * @note The snapshot is trusted: callers read it back from their own storage and check its shape.
   */
  restore(snapshot: StoreSnapshot): Promise<void> {
    return this.#durable(async () => {
      this.#categories.clear()
      for (const category of snapshot.categories) await this.#categories.create(toCategory(category))
      this.#nextCategoryId = snapshot.nextCategoryId
      this.#heldBytes = categoriesWeight(snapshot.categories)
      this.#wrote()
      return { result: undefined, write: { kind: 'replaced', snapshot: this.#snapshot() } }
    })
  }

  #snapshot(): StoreSnapshot {
    return { categories: this.#categories.all().map(toCategory), nextCategoryId: this.#nextCategoryId }
  }

  #wrote(): void {
    this.onWrite?.(this.#snapshot())
  }

  /** All categories in creation order, as plain objects. */
  listCategories(): Promise<Category[]> {
    return this.#serial(() => this.#categories.all().map(toCategory))
  }

  /** Stores a valid NewCategory under the next id. */
  createCategory(input: NewCategory): Promise<Category> {
    return this.#durable(async () => {
      if (this.#categories.count() >= this.maxCategories) throw new CategoryLimitError(this.maxCategories)
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
      this.#heldBytes += categoryWeight(record)
      this.#wrote()
      const category = toCategory(record)
      return { result: category, write: { kind: 'created', category: toCategory(record) } }
    })
  }

  /** The pet with this id, or undefined. */
  findPet(id: number): Promise<Pet | undefined> {
    return this.#serial(() => {
      const pet = this.#pets.findFirst((q) => q.where((pet) => pet.id === id))
      return pet ? structuredClone(pet) : undefined
    })
  }

  listPets(): Promise<Pet[]> {
    return this.#serial(() => this.#pets.all().map((pet) => structuredClone(pet)))
  }

  listOrders(): Promise<Order[]> {
    return this.#serial(() => this.#orders.all().map((order) => structuredClone(order)))
  }

  /**
   * What the stored data holds on the heap, estimated: about 860 bytes of collection overhead
   * per category (measured by `npm run bench -- scale`) plus its strings, and the seeded pets and orders.
   */
  get heldBytes(): number {
    return this.#heldBytes
  }

  /** How many categories are stored (no queue: a cheap figure for summaries). */
  get categoryCount(): number {
    return this.#categories.count()
  }
}

/** Heap per stored category beyond its own fields, as `bench/scale.ts` measures it. */
const CATEGORY_OVERHEAD = 860

function categoryWeight(category: Category): number {
  return CATEGORY_OVERHEAD + heapWeight(category.name) + (category.description === undefined ? 0 : heapWeight(category.description))
}

function categoriesWeight(categories: readonly Category[]): number {
  let total = 0
  for (const category of categories) total += categoryWeight(category)
  return total
}

/** @note Copies only the contract's fields, so nothing @msw/data attaches ever leaks out. */
function toCategory(record: Category): Category {
  return record.description === undefined
    ? { id: record.id, name: record.name }
    : { id: record.id, name: record.name, description: record.description }
}

/** Seeds with ids: explicit ones kept, missing ones numbered after the highest explicit id. */
function expandCategories(source: Scenario['seed']['categories']): Category[] {
  if ('generate' in source) {
    const { count, name, description } = source.generate
    return Array.from({ length: count }, (_, index) => {
      const n = String(index + 1)
      const category: Category = { id: index + 1, name: name.replaceAll('{n}', n) }
      if (description !== undefined) category.description = description.replaceAll('{n}', n)
      return category
    })
  }
  let next = source.reduce((max, seed) => Math.max(max, seed.id ?? 0), 0)
  return source.map((seed: CategorySeed) => {
    const category: Category = { id: seed.id ?? ++next, name: seed.name }
    if (seed.description !== undefined) category.description = seed.description
    return category
  })
}
