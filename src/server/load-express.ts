/**
 * express, loaded the first time something needs it (the admin API, the demo page, a 404, or
 * `sandbox.app`), so that the API answers before express and its dependencies are read: they
 * are most of what a start costs (docs/decisions/0007).
 */
import { createRequire } from 'node:module'
import type express from 'express'

type Express = typeof express

let loaded: Express | undefined

/**
 * express itself; the first call reads it from disk (synchronously: about as long as importing
 * it at start would have taken, once).
 * @note express is CommonJS: `require` loads it synchronously, so `sandbox.app` can stay a plain
 * property and a request never waits on a promise to be routed.
 */
export function loadExpress(): Express {
  loaded ??= createRequire(import.meta.url)('express') as Express
  return loaded
}
