/**
 * Runs inside a network namespace of its own (`unshare -rn`, loopback up): a redis-server and a
 * `serve --redis-url` on it; Redis is killed -9 and, while it is down, this host's ephemeral range
 * is narrowed to Redis's port alone, so that every connection the sandbox makes to it meets itself
 * (a TCP self-connect); then the range is widened again, Redis restarted on its port (with its
 * AOF), and the sandbox asked for its list until it answers 200. Prints one JSON line: what came.
 * usage: node self-connect-rig.mjs <dist/cli.js> <scratch dir>
 */
import { spawn, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { connect } from 'node:net'

const [cli, dir] = process.argv.slice(2)
const REDIS_PORT = 36540
const SANDBOX_PORT = 36570
const RANGE = '/proc/sys/net/ipv4/ip_local_port_range'
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const origin = `http://127.0.0.1:${SANDBOX_PORT}`
const headers = { authorization: 'Bearer k1', 'content-type': 'application/json' }

const startRedis = () =>
  spawnSync('redis-server', ['--port', String(REDIS_PORT), '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--daemonize', 'yes', '--pidfile', `${dir}/redis.pid`, '--logfile', `${dir}/redis.log`]).status
/** Whether something answers PING on Redis's port (a self-connected socket echoes `*1 $4 PING` instead). */
const redisAnswers = () =>
  new Promise((resolve) => {
    const socket = connect(REDIS_PORT, '127.0.0.1')
    socket.setTimeout(1000, () => socket.destroy())
    socket.once('error', () => resolve(false)).once('close', () => resolve(false))
    socket.once('data', (data) => {
      resolve(data.toString() === '+PONG\r\n')
      socket.destroy()
    })
    socket.once('connect', () => socket.write('PING\r\n'))
  })
const list = async () => {
  try {
    const response = await fetch(`${origin}/v1/categories`, { headers, signal: AbortSignal.timeout(5000) })
    return { status: response.status, body: await response.text() }
  } catch (error) {
    return { status: 0, body: String(error) }
  }
}

// No TIME-WAIT sockets in this namespace until Redis is killed: Redis's side of each connection killed with it would hold
// its port for 60 s (no self-connect could meet it meanwhile).
writeFileSync('/proc/sys/net/ipv4/tcp_max_tw_buckets', '0')
writeFileSync(RANGE, `${REDIS_PORT - 20} ${REDIS_PORT - 1}`)
startRedis()
for (let i = 0; i < 50 && !(await redisAnswers()); i++) await sleep(100)
const sandbox = spawn(process.execPath, [cli, 'serve', '--port', String(SANDBOX_PORT), '--redis-url', `redis://127.0.0.1:${REDIS_PORT}`, '--api-key', 'k1'], { stdio: ['ignore', 'pipe', 'pipe'] })
let log = ''
sandbox.stdout.setEncoding('utf8').on('data', (chunk) => (log += chunk))
sandbox.stderr.setEncoding('utf8').on('data', (chunk) => (log += chunk))
for (let i = 0; i < 100 && (await list()).status !== 200; i++) await sleep(100)
const created = []
for (const name of ['one', 'two', 'three']) {
  const response = await fetch(`${origin}/v1/categories`, { method: 'POST', headers, body: JSON.stringify({ name }) })
  created.push(response.status)
}
process.kill(Number(spawnSync('cat', [`${dir}/redis.pid`]).stdout.toString()), 'SIGKILL')
// TIME-WAIT again (for the connections the sandbox drops: attack81 F1), then Redis down: every connection to its port is
// given that port as its own end.
await sleep(500)
writeFileSync('/proc/sys/net/ipv4/tcp_max_tw_buckets', '65536')
writeFileSync(RANGE, `${REDIS_PORT} ${REDIS_PORT}`)
const whileDown = []
for (let i = 0; i < 8; i++) {
  whileDown.push((await list()).status)
  await sleep(400)
}
const sockets = spawnSync('ss', ['-tan']).stdout.toString()
writeFileSync(RANGE, `${REDIS_PORT - 20} ${REDIS_PORT - 1}`)
let restartTries = 0
while (restartTries < 10) {
  restartTries++
  startRedis()
  await sleep(500)
  if (await redisAnswers()) break
}
const restarted = await redisAnswers()
let after = await list()
for (let i = 0; i < 60 && after.status !== 200; i++) {
  await sleep(250)
  after = await list()
}
sandbox.kill('SIGKILL')
spawnSync('redis-cli', ['-p', String(REDIS_PORT), 'shutdown', 'nosave'])
console.log(JSON.stringify({ sockets, created, whileDown, restarted, restartTries, after, log }))
