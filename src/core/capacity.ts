/** Refusing work the server has no room for: what the memory budget and the connection cap throw. */

/** What an admission check is asked about: new state (a tenant, a create, a switch) or any work. */
export type Work = 'grow' | 'read'

/** What `Retry-After` says when the budget is spent, in seconds. */
export const RETRY_AFTER_SECONDS = 30

/** Thrown when the server refuses work for now; answered as 503 `over_capacity` with `Retry-After`. */
export class OverCapacityError extends Error {
  override readonly name = 'OverCapacityError'

  constructor(
    /** Why, as the Error body says it (never a path, never a key). */
    readonly reason: string,
    /** Seconds the client should wait, sent as `Retry-After`. */
    readonly retryAfterSeconds: number,
  ) {
    super(`over capacity: ${reason}`)
  }
}
