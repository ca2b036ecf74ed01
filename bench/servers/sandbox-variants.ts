/**
 * The sandbox as the throughput bench runs it, in a process of its own: `createSandboxApp` on a
 * scenario, the bench's keys, no request log, bound to 127.0.0.1 port 0. Prints its port.
 *
 *   npx tsx bench/servers/sandbox-variants.ts <variant> [scenario]
 *
 * Variants, all on the same tenants and pipeline:
 * - `listener`: what the CLI serves (`http.createServer(sandbox.listener)`).
 * - `express-app`: `sandbox.app`, the express app for embedding.
 * - `get-response`: node:http, a Fetch `Request` per request, msw's `getResponse` over the msw handlers.
 * - `http-middleware`: express 5 with `@mswjs/http-middleware` over the msw handlers (the first bridge).
 * - `durable`: `listener` with a data directory (a temporary one, removed on exit).
 * - `durable-process-crash`: the same with `durability: 'process-crash'` (no fsync before answering).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { createMiddleware } from '@mswjs/http-middleware'
import express from 'express'
import { getResponse } from 'msw'
import { DEFAULT_MAX_BODY_BYTES } from '../../src/pipeline/request-body.js'
import { randomUUID } from '../../src/core/random-uuid.js'
import { createHandlers } from '../../src/msw/create-handlers.js'
import { Pipeline } from '../../src/pipeline/pipeline.js'
import { createSandboxApp } from '../../src/server/create-sandbox-app.js'
import { BENCH_KEYS } from './keys.js'

// @note The sources, run here under tsx, leave @msw/data calling the global `crypto.randomUUID()`,
// which the build points at `src/core/random-uuid.ts` (scripts/build.mjs): Node's own makes a
// rope of ~450 bytes per record, and every variant measured a heavier store than `npm start`'s
// (POST: the listener without a log 0.432x bare against `npm start`'s 0.501x, same run). This
// process's global is pointed there too, so the variants run the store users run.
Object.defineProperty(globalThis.crypto, 'randomUUID', { value: randomUUID, configurable: true, writable: true })

const [variant = 'listener', scenario = 'default'] = process.argv.slice(2)
const dataDir = variant.startsWith('durable') ? mkdtempSync(join(tmpdir(), 'petstore-bench-')) : undefined
if (dataDir) process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }))
process.on('SIGTERM', () => process.exit(0))
// @note A POST round creates more categories than a tenant may hold by default (20,000): the
// bench lifts the limit, with lengths short enough for the list to stay serialisable, and resets
// the tenant before every POST measurement (bench/http-throughput.ts). One measurement of 3 s
// creates about 90,000 here (~30,000 a second); a create refused at the limit would stop the
// bench (it accepts no answer but 2xx). 800,000 is about the most the sandbox accepts with these
// lengths (a full list must stay serialisable), room for a machine nine times as fast.
const limits = { maxCategories: 800_000, nameMaxLength: 20, descriptionMaxLength: 20 }
const sandbox = await createSandboxApp({
  apiKeys: BENCH_KEYS,
  scenario,
  demoDir: false,
  ...limits,
  ...(dataDir ? { dataDir } : {}),
  ...(variant === 'durable-process-crash' ? { durability: 'process-crash' as const } : {}),
})
const handlers = () => createHandlers(new Pipeline({ tenants: sandbox.tenants, strict: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES }), ['*/v1'])

function getResponseListener(): RequestListener {
  const mswHandlers = handlers()
  return (req, res) => {
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD'
    const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, {
      method: req.method ?? 'GET',
      headers: req.headers as Record<string, string>,
      body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : null,
      duplex: 'half',
    } as RequestInit)
    void getResponse(mswHandlers, request).then(async (response) => {
      if (!response) {
        res.writeHead(404).end()
        return
      }
      const headers: Record<string, string> = {}
      response.headers.forEach((value, name) => (headers[name] = value))
      res.writeHead(response.status, headers).end(await response.text())
    })
  }
}

function middlewareApp(): RequestListener {
  const app = express()
  app.use(createMiddleware(...handlers()))
  return app
}

const listeners: Record<string, () => RequestListener> = {
  listener: () => sandbox.listener,
  durable: () => sandbox.listener,
  'durable-process-crash': () => sandbox.listener,
  'express-app': () => sandbox.app,
  'get-response': getResponseListener,
  'http-middleware': middlewareApp,
}
const make = listeners[variant]
if (!make) throw new Error(`unknown variant ${variant}; known: ${Object.keys(listeners).join(', ')}`)
const server = createServer(make())
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`)
})
