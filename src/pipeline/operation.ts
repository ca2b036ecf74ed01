/** What every operation receives and returns; the pipeline turns outcomes into responses. */
import type { ErrorCode, ErrorParams } from '../contract/errors.js'
import type { OperationContract } from '../contract/operations.js'
import type { CategoryLimits } from '../contract/limits.js'
import type { Tenant } from '../storage/tenant.js'
import type { AnswerPieces, ApiRequest } from './api-request.js'

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
  /** Reserves memory for a read for this tenant before it is made (see `PipelineOptions.reserve`). @default not counted */
  readonly reserve?: ((bytes: number) => () => void) | undefined
  /** Whether the runtime sends a body given in pieces as it is made (see `PipelineOptions.streams`). @default false */
  readonly streams?: boolean | undefined
}

export type Outcome =
  | {
      readonly kind: 'json'
      readonly status: number
      readonly body: unknown
      /** The body already serialised (`JSON.stringify(body)`), when the store keeps it ready. */
      readonly text?: string | undefined
      /** The body's text in pieces (`JSON.stringify(body)`, made as it is sent), in place of `body` and `text`. */
      readonly pieces?: AnswerPieces | undefined
      /**
       * Lets go of the memory reserved for the read that made this body (`OperationContext.reserve`):
       * called by the runtime once the answer is counted as it is sent, or dropped.
       */
      readonly release?: (() => void) | undefined
    }
  | {
      readonly kind: 'error'
      readonly code: ErrorCode
      readonly params?: ErrorParams
      /** Appended to the message: how the error came about. */
      readonly note?: string
    }
  | { readonly kind: 'network' }

/** An operation of the contract with what runs it. */
export interface Operation extends OperationContract {
  /** Headers every authenticated answer of this operation carries (deprecation notices). */
  readonly headers?: (tenant: Tenant) => Record<string, string>
  run(context: OperationContext): Promise<Outcome>
}

export const json = (status: number, body: unknown): Outcome => ({ kind: 'json', status, body })

/** A JSON answer whose body is already serialised. */
export const jsonText = (status: number, text: string): Outcome => ({ kind: 'json', status, body: undefined, text })

/** An outcome that is an error of the error table. */
export type ErrorOutcome = Extract<Outcome, { kind: 'error' }>

export const failure = (code: ErrorCode, params?: ErrorParams): ErrorOutcome =>
  params ? { kind: 'error', code, params } : { kind: 'error', code }

export { declaredErrorStatuses } from '../contract/operations.js'
