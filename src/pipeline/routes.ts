/** The route table: every operation the sandbox serves, in one list that all else reads. */
import { createCategory, listCategories } from './categories.js'
import type { Operation } from './operation.js'
import { listOrders } from './orders.js'
import { getPetById } from './pets.js'

export const OPERATIONS: readonly Operation[] = [listCategories, createCategory, getPetById, listOrders]

/** Paths with the operations they support, for 405 answers and their `Allow` header. */
export const PATHS: ReadonlyMap<string, readonly Operation[]> = OPERATIONS.reduce((paths, operation) => {
  paths.set(operation.path, [...(paths.get(operation.path) ?? []), operation])
  return paths
}, new Map<string, Operation[]>())
