/**
 * `node --expose-gc --import tsx test/support/pipeline-flood-probe.ts <connections>`: the heap a
 * sandbox (memory store) still holds, after full collections, once `<connections>` clients have
 * each sent one 64 KiB write of tiny pipelined requests behind a slow list (attack 2's
 * pipeflood.py) and had their connections cut (kept open, read no further, until the slow answer
 * is out); one JSON line `{ measured, sent, requests }`: the requests sent per connection, and
 * those Node handed to the server.
 * Its own process, so that nothing else the test runner holds moves the figure.
 */
import { connect, type AddressInfo } from 'node:net'
import { createSandboxApp } from '../../src/server.js'

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const collect = () => {
  gc()
  gc()
}

const connections = Number(process.argv[2])
if (!(connections > 0)) throw new Error('usage: pipeline-flood-probe.ts <connections>')
const sandbox = await createSandboxApp({ demoDir: false, apiKeys: ['flood'] })
const server = sandbox.createServer()
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
const { port } = server.address() as AddressInfo
let requests = 0
server.prependListener('request', () => requests++)
// The slow list is still being answered when the figure is taken: what it holds stays held.
const slow = 'GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flood\r\nPrefer: delay=20000\r\n\r\n'
const tiny = 'GET / HTTP/1.1\r\nHost:x\r\n\r\n'
const chunk = slow + tiny.repeat(Math.floor((65_536 - slow.length) / tiny.length))
collect()
const before = process.memoryUsage().heapUsed
const sockets = Array.from({ length: connections }, () => {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => undefined)
  socket.write(chunk)
  return socket
})
// Cut connections stay open until the slow answer ahead is out (attack 3 G2): the figure is taken
// once no more requests come (every connection cut), at most 10 s in.
for (let last = -1, waited = 0; requests !== last && waited < 10_000; waited += 300) {
  last = requests
  await new Promise((resolve) => setTimeout(resolve, 300))
}
collect()
const measured = process.memoryUsage().heapUsed - before
for (const socket of sockets) socket.destroy()
const sent = 1 + (chunk.length - slow.length) / tiny.length
process.stdout.write(`${JSON.stringify({ measured, sent, requests })}\n`)
process.exit(0)
