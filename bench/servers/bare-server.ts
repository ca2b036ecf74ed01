/**
 * The reference for the throughput bench: a bare `node:http` server that answers the default
 * scenario's category list (a fixed JSON text) and a create (read the body, parse it, check the
 * name, answer 201 with the next id) behind the same bearer check as the sandbox, and nothing
 * else. It is the practical ceiling of an HTTP server on this machine. Prints its port.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { KeyRing, readBearer } from '../../src/core/auth.js'
import { BUILTIN_SCENARIOS } from '../../src/scenario/builtin-scenarios.js'
import { BENCH_KEYS } from './keys.js'

const keys = new KeyRing(BENCH_KEYS)
const categories = BUILTIN_SCENARIOS['default']?.seed.categories
if (!Array.isArray(categories)) throw new Error('the default scenario has no category list')
// The sandbox's own field order, so both send the same bytes.
const LIST = JSON.stringify(categories.map(({ id, name, description }) => ({ id, name, description })))
let nextId = categories.length + 1

const JSON_TYPE = { 'content-type': 'application/json' }

const server = createServer((req, res) => {
  const auth = readBearer(req.headers.authorization ?? null)
  if (!auth.ok || !keys.accepts(auth.token)) {
    res.writeHead(401, JSON_TYPE).end('{"code":"invalid_api_key","message":"Invalid API key","status":401}')
    return
  }
  if (req.url !== '/v1/categories') {
    res.writeHead(404, JSON_TYPE).end('{"code":"not_found","message":"Not found","status":404}')
    return
  }
  if (req.method === 'GET') {
    res.writeHead(200, JSON_TYPE).end(LIST)
    return
  }
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { name?: unknown; description?: unknown }
    if (typeof body.name !== 'string') {
      res.writeHead(400, JSON_TYPE).end('{"code":"invalid_body","message":"name must be a string","status":400}')
      return
    }
    res.writeHead(201, JSON_TYPE).end(JSON.stringify({ id: nextId++, name: body.name, description: body.description }))
  })
})
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`)
})
