/**
 * The bridge from express to the core's msw handlers, kept in this one module so that it can be
 * swapped for a leaner one (on msw's `getResponse`) without touching the rest of the server.
 *
 * `@mswjs/http-middleware` turns the express request into a Fetch `Request` whose body is the
 * request stream itself (`Readable.toWeb(req)`, nothing buffered), so the core reads and judges
 * every body: bad JSON and bodies over the limit get our Error bodies. Requests no handler
 * matches (anything outside the base path) go on to the next express middleware.
 */
import { createMiddleware } from '@mswjs/http-middleware'
import type { RequestHandler as ExpressHandler } from 'express'
import type { RequestHandler } from 'msw'

/**
 * Express middleware answering the requests under `basePath` that the handlers match.
 * @note Only requests under `basePath` reach the middleware: it turns every request body into a
 * stream, which would leave nothing for the admin routes to read.
 */
export function mswBridge(handlers: readonly RequestHandler[], basePath: string): ExpressHandler {
  const middleware = createMiddleware(...handlers)
  return (req, res, next) => {
    if (req.path !== basePath && !req.path.startsWith(`${basePath}/`)) {
      next()
      return
    }
    // @note A simulated network failure is `Response.error()` (status 0). The middleware would
    // write status 0, which throws inside a promise nobody awaits and brings the process down
    // (unhandled rejection). Dropping the connection is what the fault means anyway.
    const writeHead = res.writeHead.bind(res)
    res.writeHead = function guardedWriteHead(this: typeof res, ...args: Parameters<typeof writeHead>) {
      if (args[0] === 0) {
        res.destroy()
        return this
      }
      // @note Answered before the body was read in full (a 413): the rest of the body would
      // stall the connection, so it is closed after this response instead of kept alive.
      if (!req.complete) res.setHeader('Connection', 'close')
      return writeHead(...args)
    } as typeof writeHead
    middleware(req, res, next)
  }
}
