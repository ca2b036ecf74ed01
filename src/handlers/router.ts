/**
 * Finds what answers a path under the base URL: an operation of the route table with its path
 * parameters, a 405 (the path exists, the method does not), or a 404. One router for every
 * runtime, so msw and the standalone server cannot disagree on a route.
 */
import type { Operation } from './operation.js'
import { PATHS } from './routes.js'

export type Route =
  | { readonly kind: 'operation'; readonly operation: Operation; readonly params: Readonly<Record<string, string>> }
  | { readonly kind: 'not_allowed'; readonly allowed: readonly Operation[] }
  | { readonly kind: 'not_found' }

interface CompiledPath {
  /** Literal segments lower-cased; parameters as `:name`. */
  readonly segments: readonly string[]
  readonly operations: readonly Operation[]
}

const COMPILED: readonly CompiledPath[] = [...PATHS].map(([path, operations]) => ({
  segments: path.split('/').slice(1).map((segment) => (segment.startsWith(':') ? segment : segment.toLowerCase())),
  operations,
}))

const NOT_FOUND: Route = { kind: 'not_found' }

/**
 * Routes `method` and `path` (relative to the base URL, starting with `/`, not yet decoded).
 * @note Matches as msw's path matching did when every route was its own msw handler: literal
 * segments ignore case, one trailing slash is allowed, and parameters are percent-decoded; a
 * malformed escape matches nothing.
 */
export function route(method: string, path: string): Route {
  const segments = (path.endsWith('/') && path.length > 1 ? path.slice(0, -1) : path).split('/').slice(1)
  for (const compiled of COMPILED) {
    const params = matchSegments(compiled.segments, segments)
    if (params === undefined) continue
    const operation = compiled.operations.find((candidate) => candidate.method === method)
    return operation ? { kind: 'operation', operation, params } : { kind: 'not_allowed', allowed: compiled.operations }
  }
  return NOT_FOUND
}

function matchSegments(pattern: readonly string[], segments: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== segments.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i]!
    const actual = segments[i]!
    if (expected.startsWith(':')) {
      if (actual === '') return undefined
      const decoded = decode(actual)
      if (decoded === undefined) return undefined
      params[expected.slice(1)] = decoded
    } else if (expected !== actual.toLowerCase()) {
      return undefined
    }
  }
  return params
}

function decode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}
