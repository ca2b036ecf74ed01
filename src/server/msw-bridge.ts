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
import { sendError } from './http-errors.js'

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
    // @note The middleware builds `new URL(req.url, <protocol>://<Host>)` outside its promise's
    // catch: a Host it cannot parse (`a b`, `[`, `a@b`) rejected a promise nobody awaited, which
    // took the whole process down. The sandbox does not route by host, so such a request is
    // answered as if sent to localhost.
    if (!isUsableOrigin(`${req.protocol}://${req.headers.host ?? ''}`)) req.headers.host = 'localhost'
    // @note msw decodes path segments while matching and throws on malformed escapes (`%ff`):
    // no route has such a path, so it is a 404 like any other unknown path.
    if (!isDecodable(req.path)) {
      sendError(res, 'not_found', { what: `Path ${req.path}` })
      return
    }
    Promise.resolve(middleware(req, res, next)).catch(next)
  }
}

function isUsableOrigin(origin: string): boolean {
  if (!URL.canParse(origin)) return false
  const url = new URL(origin)
  return url.username === '' && url.password === '' && url.pathname === '/' && url.search === '' && url.hash === ''
}

function isDecodable(path: string): boolean {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}
