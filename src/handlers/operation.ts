/** What every operation receives and returns; the pipeline turns outcomes into responses. */
import type { ErrorCode, ErrorParams } from '../contract/errors.js'
import type { CategoryLimits } from '../core/limits.js'
import type { Tenant } from '../core/tenant.js'
import type { ApiRequest } from './api-request.js'

export interface OperationContext {
  readonly request: ApiRequest
  readonly params: Readonly<Record<string, string | readonly string[] | undefined>>
  readonly tenant: Tenant
  /** The body text, read (bounded) by the pipeline for operations that take one. */
  readonly bodyText: string
  /** Reject fields NewCategory does not declare. */
  readonly strict: boolean
  /** Name and description lengths (the category count is the store's). */
  readonly limits: CategoryLimits
}

export type Outcome =
  | { readonly kind: 'json'; readonly status: number; readonly body: unknown }
  | {
      readonly kind: 'error'
      readonly code: ErrorCode
      readonly params?: ErrorParams
      /** Appended to the message: how the error came about. */
      readonly note?: string
    }
  | { readonly kind: 'network' }

export interface Operation {
  /** The operation name of the published interface (`listCategories`, …). */
  readonly id: string
  readonly method: 'GET' | 'POST'
  /** Relative to the base URL, as the interface writes it (`/pets/{petId}`): routed, shown in messages and in the OpenAPI document. */
  readonly path: string
  readonly successStatus: number
  /** Error statuses of this operation's own, beyond those every operation has (see {@link declaredErrorStatuses}). */
  readonly errorStatuses?: readonly number[]
  readonly hasBody: boolean
  /** Headers every authenticated answer of this operation carries (deprecation notices). */
  readonly headers?: (tenant: Tenant) => Record<string, string>
  run(context: OperationContext): Promise<Outcome>
}

export const json = (status: number, body: unknown): Outcome => ({ kind: 'json', status, body })

export const failure = (code: ErrorCode, params?: ErrorParams): Outcome =>
  params ? { kind: 'error', code, params } : { kind: 'error', code }

/**
 * Every error status an operation declares, in order: 400 for a body, 401, the operation's own,
 * 413 for a body, and the simulated faults 500 and 503. The OpenAPI document lists them and
 * `Prefer: code=` may force only them.
 */
export function declaredErrorStatuses(operation: Operation): number[] {
  const body = operation.hasBody
  return [...(body ? [400] : []), 401, ...(operation.errorStatuses ?? []), ...(body ? [413] : []), 500, 503]
}
