/** Codes of the errors the library throws at its caller (not HTTP errors; see the error table). */
export type PetstoreErrorCode =
  | 'unknown_scenario'
  | 'invalid_scenario'
  | 'scenario_not_readable'
  | 'invalid_option'
  /** `categories.create()` judged the input as `POST /categories` does: the same codes as its 400 and 409 answers. */
  | 'invalid_body'
  | 'missing_field'
  | 'invalid_field'
  | 'unknown_field'
  | 'category_limit'

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

  constructor(code: PetstoreErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.code = code
  }
}
