/** The msw adapter: one catch-all handler per base URL, handing every request to the pipeline. */
import { http, type HttpHandler } from 'msw'
import { fromFetchRequest, toFetchResponse } from './api-request.js'
import type { Pipeline } from './pipeline.js'

/**
 * Handlers for every base URL. Each answers everything under its base: the operations, a 405
 * for other methods on their paths, and a 404 for any other path (the core's router decides).
 * @note One handler per base, not one per route: msw runs every handler's matcher (and parses
 * the request's cookies for each) until one answers, which cost more than the operation itself.
 */
export function createHandlers(pipeline: Pipeline, baseUrls: readonly string[]): HttpHandler[] {
  return baseUrls.map((base) => {
    const relativePath = relativePathOf(base)
    return http.all(`${base}/*`, async ({ request }) => {
      const apiRequest = fromFetchRequest(request)
      return toFetchResponse(await pipeline.handle(apiRequest, relativePath(apiRequest.path)))
    })
  })
}

/**
 * How to find the path under `base` in a request path msw matched against `${base}/*`: after
 * the base's own path, its last occurrence when the base holds a wildcard (`*\/v1`), as msw's greedy match has it.
 */
function relativePathOf(base: string): (path: string) => string {
  const wildcard = base.includes('*')
  const basePath = base
    .replace(/^\*+/, '')
    .replace(/^[a-z][a-z\d+.-]*:\/\/[^/]*/i, '')
    .replace(/\/+$/, '')
    .toLowerCase()
  const prefix = `${basePath}/`
  return (path) => {
    const lower = path.toLowerCase()
    const at = wildcard ? lower.lastIndexOf(prefix) : lower.indexOf(prefix)
    return at === -1 ? path : path.slice(at + basePath.length)
  }
}
