/** Turns the route table into msw request handlers: the unit every runtime installs. */
import { http, type HttpHandler } from 'msw'
import type { Pipeline } from './pipeline.js'
import { PATHS } from './routes.js'

/**
 * Handlers for every base URL: each operation, a 405 for other methods on its path, and a 404
 * for anything else under the base.
 */
export function createHandlers(pipeline: Pipeline, baseUrls: readonly string[]): HttpHandler[] {
  return baseUrls.flatMap((base) => [
    ...[...PATHS].flatMap(([path, operations]) => [
      ...operations.map((operation) =>
        http[operation.method === 'GET' ? 'get' : 'post'](`${base}${path}`, ({ request, params }) =>
          pipeline.operation(operation, request, params),
        ),
      ),
      http.all(`${base}${path}`, ({ request }) => pipeline.notAllowed(request, operations)),
    ]),
    http.all(`${base}/*`, ({ request }) => pipeline.notFound(request)),
  ])
}
