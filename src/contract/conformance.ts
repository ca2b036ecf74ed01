/**
 * Whether one exchange with a service holds to the contract, as far as the interface says: what
 * the validating proxy (`serve --proxy`) checks of every answer the real service gives, read from
 * the operations table, the schemas and the error rules. Only the interface's rules: the
 * sandbox's own limits (name lengths, its 409 and 413) are not asked of the real service.
 */
import { answerableStatuses, contractOf, type OperationId } from './operations.js'
import { ApiError, StoredCategory } from './schemas.js'
import { isJsonMediaType } from './media-type.js'

/** One exchange as seen on the wire. */
export interface Exchange {
  /** The operation the request's method and path name, or null for a path the interface does not have. */
  readonly operation: OperationId | null
  readonly request: { readonly contentType: string | null; readonly text: string }
  /** `text` undefined: the body could not be read as text (the service encoded it), so only its status and headers are checked. */
  readonly response: {
    readonly status: number
    readonly contentType: string | null
    readonly text: string | undefined
    /** The `WWW-Authenticate` header, which a 401 must carry (RFC 9110 §15.5.2); undefined when not known. */
    readonly wwwAuthenticate?: string | null | undefined
  }
}

/**
 * The most violations one exchange names; past it, one more sentence says how many were left
 * out (attack4 H4: a list of 300,000 invalid items gave 300,000 sentences, 18 MB in one journal entry).
 */
export const MAX_VIOLATIONS = 20

/**
 * Where the exchange departs from the contract, one sentence each (empty when it holds). A
 * sentence starts with `request:` or `response:` and names the rule.
 * @example exchangeViolations({ operation: 'listCategories', request, response }) // ['response: 200 body: [0].id: expected an integer']
 */
export function exchangeViolations(exchange: Exchange): string[] {
  const violations = allViolations(exchange)
  if (violations.length <= MAX_VIOLATIONS) return violations
  return [...violations.slice(0, MAX_VIOLATIONS), `response: ...and more violations past the first ${MAX_VIOLATIONS} (not listed)`]
}

function allViolations(exchange: Exchange): string[] {
  if (exchange.operation === null) return []
  const operation = contractOf(exchange.operation)
  const violations: string[] = []
  const { request, response } = exchange
  let sent: Record<string, unknown> | undefined
  if (operation.body !== undefined) {
    if (!isJsonMediaType(request.contentType)) violations.push(`request: Content-Type is ${shown(request.contentType)}, the interface asks for application/json`)
    const parsed = parse(request.text)
    if (isObject(parsed)) sent = parsed
  }
  const { status } = response
  const declared = answerableStatuses(operation)
  if (!declared.includes(status)) violations.push(`response: status ${status} is not one ${operation.id} answers (${declared.join(', ')})`)
  // @note Pets and orders: the interface shows no answer of theirs beyond the errors' rule.
  const published = operation.success.schema === 'Category' || operation.success.schema === 'Category[]'
  const answersJson = status >= 400 || (status === operation.success.status && published)
  if (!answersJson) return violations
  if (!isJsonMediaType(response.contentType)) violations.push(`response: ${status} Content-Type is ${shown(response.contentType)}, not application/json`)
  if (response.text === undefined) return violations
  const body = parse(response.text)
  if (body === NOT_JSON) {
    violations.push(`response: ${status} body is not JSON`)
    return violations
  }
  if (status >= 400) {
    if (status === 401 && response.wwwAuthenticate === null) violations.push('response: 401 has no WWW-Authenticate challenge (HTTP requires one; the interface uses Bearer)')
    violations.push(...issues(ApiError.safeParse(body), `${status} Error body`))
    if (isObject(body) && typeof body['status'] === 'number' && body['status'] !== status) violations.push(`response: ${status} Error body says status ${body['status']}`)
    return violations
  }
  if (operation.success.schema === 'Category[]') {
    if (!Array.isArray(body)) violations.push(`response: ${status} body is not an array of categories`)
    else {
      // @note Items are judged until the sentences pass the most an exchange names: a list of a
      // million wrong items costs no more than one of a hundred.
      for (let index = 0; index < body.length && violations.length <= MAX_VIOLATIONS; index++) {
        violations.push(...issues(StoredCategory.safeParse(body[index]), `${status} body [${index}]`))
      }
    }
  } else if (operation.success.schema === 'Category') {
    violations.push(...issues(StoredCategory.safeParse(body), `${status} body`))
    if (sent !== undefined && isObject(body)) {
      if (typeof sent['name'] === 'string' && body['name'] !== sent['name']) violations.push(`response: ${status} name is not the name sent`)
      if (typeof sent['description'] === 'string' && body['description'] !== sent['description']) violations.push(`response: ${status} description is not the description sent`)
    }
  }
  return violations
}

const NOT_JSON = Symbol('not JSON')

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return NOT_JSON
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

const shown = (contentType: string | null) => (contentType === null ? 'missing' : JSON.stringify(contentType))

/** A schema's complaints as sentences: `response: 200 body [0]: id: expected an integer`. */
function issues(result: { success: boolean; error?: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } }, where: string): string[] {
  if (result.success || result.error === undefined) return []
  return result.error.issues.map((issue) => `response: ${where}: ${issue.path.length > 0 ? `${issue.path.map(String).join('.')}: ` : ''}${issue.message}`)
}
