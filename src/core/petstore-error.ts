/** Codes of the errors the library throws at its caller (not HTTP errors; see the error table). */
export type PetstoreErrorCode =
  | 'unknown_scenario'
  | 'invalid_scenario'
  | 'scenario_not_readable'
  | 'invalid_option'
  /** The browser's petstore read synchronously before it loaded: await `worker.start()` first. */
  | 'not_ready'
  /** `categories.create()` judged the input as `POST /categories` does: the same codes as its 400 and 409 answers. */
  | 'invalid_body'
  | 'missing_field'
  | 'invalid_field'
  | 'unknown_field'
  | 'category_limit'
  /** `recordScenario()`: the service answered 401 to the key given. */
  | 'upstream_refused_key'
  /** `recordScenario()`, `verifyService()`: the service did not answer (refused, unknown host, timed out). */
  | 'upstream_unreachable'
  /** `recordScenario()`: an answer the contract or the scenario format refuses. */
  | 'upstream_nonconformant'

/**
 * Thrown when the library is misused: an unknown scenario, a broken scenario file, a bad option.
 * `code` is stable; the message says what failed, why, and what to do.
 *
 * @example
 * try { await petstore.useScenario('nope') } catch (error) {
 *   if (error instanceof PetstoreError && error.code === 'unknown_scenario') { ... }
 * }
 */
export class PetstoreError extends Error {
  override readonly name = 'PetstoreError'
  readonly code: PetstoreErrorCode
  /** The files the message names by their paths (a scenario file, a fixture), for a client to be told their names alone. */
  readonly paths: readonly string[]

  constructor(code: PetstoreErrorCode, message: string, options?: ErrorOptions & { readonly paths?: readonly string[] }) {
    super(message, options)
    this.code = code
    this.paths = options?.paths ?? []
  }
}

/**
 * A value as an error message shows what was received: strings quoted, arrays and objects as
 * JSON (cut short), anything else by its type.
 */
export function describeValue(value: unknown): string {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') {
    return value === undefined ? 'undefined' : `a ${typeof value}`
  }
  let text: string
  try {
    text = JSON.stringify(value)
  } catch {
    return Array.isArray(value) ? 'an array' : 'an object'
  }
  if (typeof value === 'number' && !Number.isFinite(value)) text = String(value)
  return text.length > 80 ? `${text.slice(0, 77)}...` : text
}
