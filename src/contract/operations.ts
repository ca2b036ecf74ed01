/**
 * The operations of the published interface, as data: every fact about an operation (id,
 * method, path, success, body, error statuses, summary, deprecation) in one table. The router,
 * the pipeline (`Prefer` checks, messages), the OpenAPI document, CORS and the journal read it;
 * `pipeline/` holds only what runs.
 */

/**
 * The operation names of the published interface.
 * @example petstore.answers.next({ operation: 'listCategories' satisfies OperationId, status: 401 })
 */
export type OperationId = 'listCategories' | 'createCategory' | 'getPetById' | 'listOrders'

/** A component schema of the OpenAPI document, or an array of one. */
export type SchemaName = 'Category' | 'NewCategory' | 'Pet' | 'Order'
export type ResponseSchema = SchemaName | `${SchemaName}[]`

/** What the interface says of one operation. */
export interface OperationContract {
  readonly id: OperationId
  readonly method: 'GET' | 'POST'
  /** Relative to the base URL, as the interface writes it (`/pets/{petId}`): routed, shown in messages and in the OpenAPI document. */
  readonly path: string
  readonly summary: string
  readonly success: { readonly status: number; readonly description: string; readonly schema: ResponseSchema }
  /** The request body's schema, for operations that take one. */
  readonly body?: SchemaName
  /** A request body the sandbox accepts, the document's example (tools such as Dredd send it). */
  readonly bodyExample?: Readonly<Record<string, unknown>>
  /** Error statuses of this operation's own, beyond those every operation has (see {@link declaredErrorStatuses}). */
  readonly errorStatuses?: readonly number[]
  /**
   * Path parameters, each an int64 id as far as the interface shows, with an example value that
   * the default scenario answers (contract tools such as Dredd build their requests from it).
   */
  readonly params?: readonly { readonly name: string; readonly description: string; readonly example: number }[]
  /** Marked deprecated, with a sunset date (the interface gives neither date: scenarios do). */
  readonly deprecated?: true
}

export const OPERATION_CONTRACTS = [
  {
    id: 'listCategories',
    method: 'GET',
    path: '/categories',
    summary: 'List all categories',
    success: { status: 200, description: 'All categories, in creation order', schema: 'Category[]' },
  },
  {
    id: 'createCategory',
    method: 'POST',
    path: '/categories',
    summary: 'Create a category',
    success: { status: 201, description: 'The created category, with its assigned id', schema: 'Category' },
    body: 'NewCategory',
    bodyExample: { name: 'Hamsters', description: 'Small rodents' },
    errorStatuses: [409],
  },
  {
    id: 'getPetById',
    method: 'GET',
    path: '/pets/{petId}',
    summary: 'Read a pet by id (deprecated)',
    success: { status: 200, description: 'The pet; its fields come from the scenario', schema: 'Pet' },
    errorStatuses: [404, 410],
    params: [{ name: 'petId', description: 'The id of the pet', example: 1 }],
    deprecated: true,
  },
  {
    id: 'listOrders',
    method: 'GET',
    path: '/store/orders',
    summary: 'List store orders',
    success: { status: 200, description: 'The orders of the scenario', schema: 'Order[]' },
  },
] as const satisfies readonly OperationContract[]

/**
 * The areas the interface names (the category resource, the pets area, the store area), each
 * with what it says of it: the OpenAPI document's tags, by which generated clients group
 * operations.
 */
export const INTERFACE_AREAS = {
  categories: 'The category resource, which classifies pets (for example dog, cat, rabbit)',
  pets: 'The pets area: the interface names the read by id and does not show its behaviour or the fields of pets',
  store: 'The store area: the interface names the list of orders and does not show its behaviour or the fields of orders',
} as const

/** An area of the interface ({@link INTERFACE_AREAS}). */
export type InterfaceArea = keyof typeof INTERFACE_AREAS

/** The area an operation belongs to: the first segment of its path (`/store/orders` is the store's). */
export function areaOf(operation: OperationContract): InterfaceArea {
  const area = operation.path.split('/')[1] ?? ''
  if (!Object.hasOwn(INTERFACE_AREAS, area)) throw new Error(`${operation.id}: ${operation.path} is in no area of the interface`)
  return area as InterfaceArea
}

/** The contract of the operation named `id`. */
export function contractOf(id: OperationId): OperationContract {
  return OPERATION_CONTRACTS.find((contract) => contract.id === id)!
}

/**
 * Every error status an operation declares, in order: 400 for a body, 401, the operation's own,
 * 413 for a body, and the simulated faults 500 and 503. The OpenAPI document lists them and
 * `Prefer: code=` may force only them.
 */
export function declaredErrorStatuses(operation: OperationContract): number[] {
  const body = operation.body !== undefined
  return [...(body ? [400] : []), 401, ...(operation.errorStatuses ?? []), ...(body ? [413] : []), 500, 503]
}

/**
 * The statuses an operation may be made to answer, by `Prefer: code=` or a planned answer: its
 * success and every error status it declares ({@link declaredErrorStatuses}).
 */
export function answerableStatuses(operation: OperationContract): number[] {
  return [operation.success.status, ...declaredErrorStatuses(operation)]
}

/** The methods a path answers: its operations' and, where one is GET, HEAD (RFC 9110 §9.3.2). */
export function allowedMethods(operations: readonly OperationContract[]): string[] {
  const methods: string[] = operations.map((operation) => operation.method)
  const get = methods.indexOf('GET')
  return get === -1 ? methods : [...methods.slice(0, get + 1), 'HEAD', ...methods.slice(get + 1)]
}

/** Every method the API answers on some path, for CORS preflights. */
export const API_METHODS: readonly string[] = [...new Set(allowedMethods(OPERATION_CONTRACTS))]
