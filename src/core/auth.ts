/** Bearer authentication: parsing the header and comparing keys in constant time. */

export type AuthResult =
  | { readonly ok: true; readonly token: string }
  | { readonly ok: false; readonly code: 'missing_api_key' }
  | { readonly ok: false; readonly code: 'invalid_api_key'; readonly reason: string }

/** A failed authentication. */
export type AuthFailure = Exclude<AuthResult, { ok: true }>

/** Reads `Authorization: Bearer <token>` (scheme case-insensitive). Says nothing of the key itself. */
export function readBearer(header: string | null): AuthResult {
  if (header === null || header.trim() === '') return { ok: false, code: 'missing_api_key' }
  const match = /^\s*(\S+)\s+(\S+)\s*$/.exec(header)
  if (!match || match[1]!.toLowerCase() !== 'bearer') {
    return { ok: false, code: 'invalid_api_key', reason: 'the Authorization header must be "Bearer <API_KEY>"' }
  }
  return { ok: true, token: match[2]! }
}

/** The answer to a well-formed bearer token that is not an accepted key (API and admin API alike). */
export const NOT_ACCEPTED: AuthFailure = { ok: false, code: 'invalid_api_key', reason: 'the key is not accepted by this sandbox' }

/** A failed authentication as the error table's code and parameters. */
export function authError(result: AuthFailure): { code: 'missing_api_key' | 'invalid_api_key'; params?: { reason: string } } {
  return result.code === 'missing_api_key' ? { code: result.code } : { code: result.code, params: { reason: result.reason } }
}

/** The `WWW-Authenticate` of a 401 answer with this code (RFC 6750): `invalid_token` for a key that was sent. */
export function wwwAuthenticate(code: string): string {
  return code === 'invalid_api_key' ? 'Bearer error="invalid_token"' : 'Bearer'
}

const encoder = new TextEncoder()

/**
 * The accepted keys. `'any'` accepts every non-empty token (each is then its own key).
 * @note Every key is compared in full, whatever matched, so the time taken says nothing about
 * which key or how much of it a guess got right.
 */
export class KeyRing {
  readonly #keys: readonly Uint8Array[] | 'any'

  constructor(keys: readonly string[] | 'any') {
    this.#keys = keys === 'any' ? 'any' : keys.map((key) => encoder.encode(key))
  }


  accepts(token: string): boolean {
    if (this.#keys === 'any') return token.length > 0
    const candidate = encoder.encode(token)
    let accepted = 0
    for (const key of this.#keys) accepted |= constantTimeEqual(candidate, key)
    return accepted === 1
  }
}

/** 1 when equal, 0 otherwise, in time that depends only on the lengths. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): number {
  const length = Math.max(a.length, b.length)
  let difference = a.length ^ b.length
  for (let i = 0; i < length; i++) difference |= (a[i] ?? 0) ^ (b[i] ?? 0)
  return difference === 0 ? 1 : 0
}
