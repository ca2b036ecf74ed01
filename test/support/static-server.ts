/** A tiny static file server on 127.0.0.1, port 0, registered for teardown after the suite. */
import { readFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { extname, join, normalize } from 'node:path'
import { afterAll, beforeAll } from 'vitest'

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
}

/** Serves `root()` (known once `beforeAll` ran) and returns the base URL once listening. */
export function useStaticServer(root: () => string): { url(): string } {
  let server: Server | undefined
  let base = ''
  beforeAll(async () => {
    server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname
      const file = normalize(join(root(), path === '/' ? 'index.html' : path))
      if (!file.startsWith(root())) {
        response.writeHead(403).end()
        return
      }
      readFile(file).then(
        (content) => {
          response.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(content)
        },
        () => response.writeHead(404, { 'content-type': 'text/plain' }).end('not found'),
      )
    })
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
  })
  return { url: () => base }
}
