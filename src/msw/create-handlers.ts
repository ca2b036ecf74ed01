/** The msw adapter: catch-all handlers per base URL, handing every request to the pipeline. */
import { http, type HttpHandler, type HttpResponseResolver } from 'msw'
import { fromFetchRequest, toFetchResponse } from './fetch-request.js'
import type { Pipeline } from '../pipeline/pipeline.js'
import { baseUrlPath } from '../core/journal-filter.js'

/**
 * Handlers for every base URL: the base itself and everything under it. They answer the
 * operations, a 405 for other methods on their paths, and a 404 for any other path (the core's
 * router decides).
 * @note Two handlers per base, not one per route: msw runs every handler's matcher (and parses
 * the request's cookies for each) until one answers, which cost more than the operation itself.
 */
export function createHandlers(pipeline: Pipeline, baseUrls: readonly string[]): HttpHandler[] {
  return baseUrls.flatMap((base) => {
    const relativePath = relativePathOf(base)
    const resolver: HttpResponseResolver = async ({ request }) => {
      const apiRequest = fromFetchRequest(request)
      const path = relativePath(apiRequest.path)
      // Not under the base after all (`*\/v1` matched `/static/v1/app.js`): not ours to answer.
      if (path === undefined) return undefined
      return toFetchResponse(await pipeline.handle(apiRequest, path), apiRequest.method)
    }
    return [http.all(`${base}/*`, resolver), http.all(base, resolver)]
  })
}

/**
 * How to find the path under `base` in a request path msw matched: what follows the base's own
 * path (`/v1` of `*\/v1` or `https://api.shop.test/v1`), which must start the request's path.
 * @note msw's `*` also matches path segments (`*\/v1` matches `/static/v1/app.js`); here it
 * stands for any origin, so such a path is left to other handlers.
 */
function relativePathOf(base: string): (path: string) => string | undefined {
  const basePath = baseUrlPath(base)
  return (path) => {
    if (path === basePath) return ''
    return path.startsWith(`${basePath}/`) ? path.slice(basePath.length) : undefined
  }
}
