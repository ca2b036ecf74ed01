/**
 * `serve --workers N` (issue 14, target 3): several processes of the CLI on one port, every tenant
 * in Redis, so that each tenant's rules hold whichever process answers: its list, its ids, its
 * journal, its category cap. Real CLI processes, a real redis-server.
 */
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect, createServer, type AddressInfo } from 'node:net'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { evictForAMoment, REQUIRE_REDIS, startRedis } from '../support/redis-server.js'
import { runLoad, serverErrors, verifyLoad } from '../support/replicas.js'
import { CLI_BINARY, runCli, runCliToEnd, type CliRun } from '../support/sandbox-cli.js'
import { freePort } from '../support/redis-server.js'

const READY = 'Ctrl+C stops it.'
const NO_LOSS = { lost: 0, unexpected: 0, badIds: 0, journalMissing: 0, journalExtra: 0, inFlightApplied: 0 }
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** The worker processes of a CLI run: its children. */
function workersOf(run: CliRun): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(run.child.pid)], { encoding: 'utf8' }).split('\n').map((line) => Number(line.trim())).filter((pid) => pid > 0)
  } catch {
    return [] // ps exits 1 when there are none
  }
}

/** Bytes a process has written (its request log, here): grows only for a worker that answered. */
function written(pid: number): number {
  return Number(/wchar: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))![1])
}

async function startWorkers(count: number, redisUrl: string, extra: readonly string[] = [], env: Record<string, string> = {}) {
  const port = await freePort()
  const run = runCli(['serve', '--port', String(port), '--workers', String(count), '--redis-url', redisUrl, '--any-key', '--scenario', 'empty', '--log', 'json', '--journal-bytes', '64MiB', ...extra], env)
  await run.waitFor(READY)
  return { run, origin: `http://127.0.0.1:${port}` }
}

describe('serve --workers without a shared store', () => {
  it.each([
    ['in memory', []],
    ['with --data-dir', ['--data-dir', '/tmp/petstore-workers-never-created']],
  ])('refuses %s, with one line that names --redis-url', async (_, extra) => {
    const { code, stdout, stderr } = await runCliToEnd(['serve', '--port', '0', '--workers', '2', ...extra])
    expect(code).toBe(1)
    expect(stdout).toBe('')
    expect(stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^petstore-sandbox: --workers 2 needs --redis-url: .*redis-server/)])
  })

  it('refuses a count that is not one, with the range', async () => {
    const { code, stderr } = await runCliToEnd(['serve', '--port', '0', '--workers', 'two'])
    expect(code).toBe(1)
    expect(stderr.trim()).toBe('petstore-sandbox: --workers must be an integer from 1 to 1024, or auto (one per core), got "two"')
  })
})

describe.runIf(REQUIRE_REDIS)('serve --workers 2 --redis-url', { timeout: 90_000 }, () => {
  it('prints one banner saying so and runs two worker processes, both answering, every tenant intact under mixed load; a category cap holds across them', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url, ['--max-categories', '100'])
    expect(run.stdout().match(/is running/g)).toHaveLength(1)
    expect(run.stdout()).toContain('workers    2 processes on this port (node:cluster), every tenant in Redis')
    const workers = workersOf(run)
    expect(workers).toHaveLength(2)
    const before = workers.map(written)

    const keys = Array.from({ length: 20 }, (_, i) => `worker-partner-${i}`)
    // At most 150 requests per tenant, so fewer than 100 creates: the load never meets the cap.
    const report = await runLoad({ origin, keys, seconds: 2, maxPerTenant: 150 })
    expect(report.requests).toBeGreaterThan(50)
    expect(serverErrors(report)).toBe(0)
    expect(report.networkErrors).toBe(0)
    expect(await verifyLoad(origin, report)).toEqual(NO_LOSS)
    // Both processes answered some of it (each writes the log lines of the requests it answers).
    expect(workers.map((pid, i) => written(pid) > before[i]!)).toEqual([true, true])

    // The cap (100): a tenant 5 short of it, then 12 concurrent creates on fresh connections: exactly 5 succeed.
    for (let batch = 0; batch < 5; batch++) {
      const statuses = await Promise.all(
        Array.from({ length: 19 }, (_, i) =>
          fetch(`${origin}/v1/categories`, { method: 'POST', headers: { authorization: 'Bearer capped', 'content-type': 'application/json' }, body: JSON.stringify({ name: `f${batch}-${i}` }) }).then((response) => response.status),
        ),
      )
      expect(statuses).toEqual(Array(19).fill(201))
    }
    const create = (i: number) =>
      fetch(`${origin}/v1/categories`, {
        method: 'POST',
        headers: { authorization: 'Bearer capped', 'content-type': 'application/json', connection: 'close' },
        body: JSON.stringify({ name: `c${i}` }),
      }).then(async (response) => ({ status: response.status, body: (await response.json()) as { code?: string } }))
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => create(i)))
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(5)
    expect(answers.filter((answer) => answer.status === 409).map((answer) => answer.body.code)).toEqual(Array(7).fill('category_limit'))
    const listed = await fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer capped' } }).then((response) => response.json() as Promise<unknown[]>)
    expect(listed).toHaveLength(100)
  })

  it('replaces a worker that dies, serving meanwhile; SIGTERM stops every worker and exits 0', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    const [victim, survivor] = workersOf(run)
    const created = await fetch(`${origin}/v1/categories`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: '{"name":"kept"}' })
    expect(created.status).toBe(201)
    process.kill(victim!, 'SIGKILL')
    for (let tries = 0; workersOf(run).length < 2 || workersOf(run).includes(victim!); tries++) {
      if (tries > 100) throw new Error(`no replacement worker: ${workersOf(run).join(', ')}\n${run.stderr()}`)
      await sleep(100)
    }
    expect(workersOf(run)).toContain(survivor)
    await expect.poll(() => run.stderr()).toContain(`petstore-sandbox: worker ${victim} exited (killed by SIGKILL); starting another`)
    for (let i = 0; i < 6; i++) {
      const listed = await fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer k', connection: 'close' } })
      expect(await listed.json()).toEqual([{ id: 1, name: 'kept' }])
    }
    const workers = workersOf(run)
    run.child.kill('SIGTERM')
    expect(await run.exited).toBe(0)
    await sleep(200)
    expect(workers.filter((pid) => existsProcess(pid))).toEqual([])
  })

  it('rides out a Redis outage: a worker that dies while Redis is down is replaced by one that listens and answers 503 storage_unavailable (health degraded), and every worker serves again once Redis is back (issue 20 F06)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    expect((await post(origin, 'k', 'before')).status).toBe(201)
    // Kept across the outage (a Redis back without the sandbox's keys is refused for good: attack23 R1).
    await redis.cli('SAVE')
    await redis.stop()
    const [victim, survivor] = workersOf(run)
    process.kill(victim!, 'SIGKILL')
    // Its replacement starts with no Redis to reach: it must listen all the same, not exit.
    await untilStderr(run, (text) => text.includes(`is serving (in place of worker ${victim})`) || /exited \(exit code/.test(text))
    expect(run.stderr()).not.toMatch(/exited \(exit code/)
    // Whichever worker takes a connection (each accepts for itself) answers 503 with Retry-After.
    for (let i = 0; i < 4; i++) {
      const refused = await post(origin, 'k', `during-${i}`)
      expect(refused.status).toBe(503)
      expect(refused.headers.get('retry-after')).toBe('5')
      expect(((await refused.json()) as { code: string }).code).toBe('storage_unavailable')
      const health = await fetch(`${origin}/__sandbox/health`, { headers: { connection: 'close' } })
      expect(health.status).toBe(503)
      expect(((await health.json()) as { status: string }).status).toBe('degraded')
    }
    await redis.start()
    await untilServing(origin, run)
    expect(workersOf(run)).toContain(survivor)
    expect(workersOf(run)).toHaveLength(2)
    expect(run.child.exitCode).toBeNull()
  })

  it.each([
    { when: 'during an outage', after: false },
    { when: 'after both workers refused', after: true },
  ])('refuses on a worker started in place of one that died $when a Redis back from an older snapshot: no id handed out again (attack39 F6)', async ({ after }) => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    expect((await post(origin, 'k', 'kept')).status).toBe(201)
    await redis.cli('SAVE')
    // Answered 201 after the snapshot, then a beat of the epoch counted and confirmed after them.
    const lost = await Promise.all([post(origin, 'k', 'lost-1'), post(origin, 'k', 'lost-2')])
    expect(lost.map((answer) => answer.status)).toEqual([201, 201])
    const lostIds = await Promise.all(lost.map(async (answer) => ((await answer.json()) as { id: number }).id))
    await sleep(2500)
    await redis.stop()
    const [victim] = workersOf(run)
    if (after) {
      await redis.start()
      await untilStderr(run, (text) => text.split('storage lost:').length > 2)
    }
    process.kill(victim!, 'SIGKILL')
    await untilStderr(run, (text) => text.includes(`is serving (in place of worker ${victim})`))
    if (!after) await redis.start()
    // Before: the new worker took the restored Redis for a new one: 201 with the ids of 'lost-1' and 'lost-2' again,
    // health ok, while its sibling refused. Each create on a new connection, taken by whichever worker accepts first.
    const answers: string[] = []
    for (let i = 0; i < 24; i++) {
      const answer = await post(origin, 'k', `after-${i}`)
      const body = (await answer.json()) as { id?: number; code?: string }
      answers.push(answer.status === 201 ? `201 id ${body.id}${lostIds.includes(body.id!) ? ' (handed out again)' : ''}` : `${answer.status} ${body.code}`)
      await sleep(50)
    }
    expect(answers.filter((answer) => !answer.startsWith('503')), run.stderr()).toEqual([])
  })

  it('serves again on every worker once a Redis that came back evicting is set to noeviction, on API requests alone, no health probe (issue 20 redis2: eviction refusal re-checked by requests)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    expect((await post(origin, 'k', 'before')).status).toBe(201)
    await redis.cli('SAVE')
    await redis.stop()
    await redis.start({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] })
    // The workers refuse (whichever takes the connection), once each has reconnected.
    const signal = AbortSignal.timeout(30_000)
    for (let row = 0; row < 4; ) {
      if (signal.aborted) throw new Error(`the workers did not refuse the evicting Redis\n${run.stderr()}`)
      const response = await post(origin, 'k', 'while evicting')
      const body = (await response.json()) as { code?: string; message?: string }
      row = response.status === 503 && body.code === 'storage_unavailable' && /maxmemory-policy/.test(run.stderr()) ? row + 1 : 0
      if (row === 0) await sleep(200)
    }
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    await untilServing(origin, run)
  })

  it('starts a worker in place of one that died while Redis may evict keys, answering 503 until it is set to noeviction, rather than exit again and again (attack43 F2)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    expect((await post(origin, 'k', 'before')).status).toBe(201)
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru')
    // Before: each replacement exited at start ("Cannot use Redis …: its maxmemory-policy is volatile-lru"), again and
    // again: with both gone, connections refused, no 503 and no health.
    await replaceEveryWorkerThenRefused(run, origin)
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    await untilServing(origin, run)
  })

  it('starts a worker in place of one that died while its Redis is a demoted replica, answering 503 until it is a master again, rather than exit again and again (attack46 F2)', async () => {
    const redis = await startRedis()
    const other = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    expect((await post(origin, 'k', 'before')).status).toBe(201)
    // A failover: the other Redis, a copy of this one, is promoted, and this one demoted to its replica.
    await other.cli('REPLICAOF', '127.0.0.1', String(redis.port))
    await until(async () => /master_link_status:up/.test(await other.cli('INFO', 'replication')))
    await other.cli('REPLICAOF', 'NO', 'ONE')
    await redis.cli('REPLICAOF', '127.0.0.1', String(other.port))
    await until(async () => /master_link_status:up/.test(await redis.cli('INFO', 'replication')))
    // Before: each replacement exited at start ("Cannot use Redis …: it is a replica of …"), again and again: with both
    // gone, connections refused, no 503 and no health.
    await replaceEveryWorkerThenRefused(run, origin)
    expect(run.stderr()).toContain('it is a replica of 127.0.0.1:')
    await redis.cli('REPLICAOF', 'NO', 'ONE')
    await untilServing(origin, run)
  })

  it('starts a worker in place of one that died while its user may not run scripts, though the sandbox, started while Redis was down, never took the token it could hand on: 503 until allowed, rather than exit again and again (attack61 F6)', async () => {
    const redis = await startRedis()
    await redis.stop()
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    const { run, origin } = await startWorkers(2, url)
    await redis.start({ extraArgs: ['--user', 'sb', 'on', '>secret', '~*', '&*', '+@all', '-@scripting'] })
    // Before: no epoch to hand, each replacement exited at start ("it refuses writes (NOPERM … 'evalsha' …)"), again and again.
    await replaceEveryWorkerThenRefused(run, origin)
    await redis.cli('ACL', 'SETUSER', 'sb', '+@scripting')
    await untilServing(origin, run)
  })

  it('starts a worker in place of one that died after the workers found keys evicted lost too: it refuses, never serving the evicted state (attack49 F1)', async () => {
    const redis = await startRedis()
    await redis.cli('CONFIG', 'RESETSTAT')
    const { run, origin } = await startWorkers(2, redis.url)
    for (let tenant = 0; tenant < 10; tenant++) for (let i = 0; i < 5; i++) expect((await post(origin, `k${tenant}`, `c${i}`)).status).toBe(201)
    // An operator lets Redis evict keys with a time to live (tenants' keys; the epoch's have none), a moment, and back.
    expect(await evictForAMoment(redis)).toBeGreaterThan(0)
    // Each worker finds it at its next read of the count.
    await untilStderr(run, (text) => text.split('storage lost:').length > 2)
    // Before: each replacement counted the evictions from its own first read and answered 201, ids handed out again.
    await replaceEveryWorkerThenRefused(run, origin)
  })

  it('hands its first workers no epoch of its own environment: a PETSTORE_WORKER_EPOCH left in the shell is not taken for what Redis held (attack41 F2)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url, [], { PETSTORE_WORKER_EPOCH: JSON.stringify({ token: 'left-in-a-shell', beat: 7 }) })
    // Each on its own connection, so that both workers answer some.
    for (let i = 0; i < 6; i++) {
      const created = await post(origin, 'k', `created ${i}`)
      expect(created.status, `${i}: ${await created.clone().text()}\n${run.stderr()}`).toBe(201)
    }
    const health = await fetch(`${origin}/__sandbox/health`, { headers: { connection: 'close' } })
    expect(await health.json()).toMatchObject({ status: 'ok' })
    expect(run.stderr()).not.toContain('storage lost')
  })

  it('takes no epoch from its environment under another cluster supervisor (PM2 cluster mode): only its own primary hands one (review41 R6)', async () => {
    const redis = await startRedis()
    const port = await freePort()
    // A primary of another kind forks the CLI as its worker, the variable in its environment (a unit file, a shell).
    const primary = [
      "const cluster = require('node:cluster')",
      `cluster.setupPrimary({ exec: ${JSON.stringify(CLI_BINARY)}, args: ['serve', '--port', '${port}', '--redis-url', '${redis.url}', '--scenario', 'empty', '--api-key', 'k'], execArgv: [], silent: false })`,
      "cluster.fork({ PETSTORE_WORKER_EPOCH: JSON.stringify({ token: 'left-in-a-unit', beat: 7 }) })",
    ].join(';')
    // Not a cluster worker itself, whatever runs the test.
    const env = { ...process.env }
    delete env['NODE_UNIQUE_ID']
    const child = spawn(process.execPath, ['-e', primary], { stdio: ['ignore', 'ignore', 'pipe'], env })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    onTestFinished(() => void child.kill('SIGKILL'))
    const origin = `http://127.0.0.1:${port}`
    const signal = AbortSignal.timeout(30_000)
    while (!(await fetch(`${origin}/__sandbox/health`).then(() => true, () => false))) {
      if (signal.aborted) throw new Error(`the worker never served\n${stderr}`)
      await sleep(100)
    }
    // Before: taken for what Redis held, the token refused it: storage lost, every create 503.
    const created = await post(origin, 'k', 'created')
    expect(created.status, `${await created.clone().text()}\n${stderr}`).toBe(201)
    expect(stderr).not.toContain('storage lost')
  })

  it('starts with Redis down, answering 503 until it comes up (issue 20 F06)', async () => {
    const redis = await startRedis()
    await redis.stop()
    const { run, origin } = await startWorkers(2, redis.url)
    expect(run.stderr()).toContain('answering 503 storage_unavailable until it recovers')
    expect((await post(origin, 'k', 'early')).status).toBe(503)
    await redis.start()
    await untilServing(origin, run)
  })

  it('never gives up on a worker that keeps dying nor stops the one serving: 6 deaths within a minute are restarted later and later, the other worker answering throughout (issue 20 F06)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    const [first, survivor] = workersOf(run)
    let victim = first!
    for (let death = 1; death <= 6; death++) {
      process.kill(victim, 'SIGKILL')
      await untilStderr(run, (text) => text.includes(`worker ${victim} exited (killed by SIGKILL)`))
      expect((await post(origin, 'k', `death-${death}`)).status).toBe(201)
      if (death === 6) break
      const dead = victim
      await untilStderr(run, (text) => text.includes(`is serving (in place of worker ${dead})`))
      victim = workersOf(run).find((pid) => pid !== survivor)!
    }
    expect(run.stderr()).toContain(`worker ${victim} exited (killed by SIGKILL); starting another in 8 s (6 exits within 60 s)`)
    expect(run.stderr()).not.toContain('stopping')
    for (let i = 0; i < 4; i++) expect((await post(origin, 'k', `meanwhile-${i}`)).status).toBe(201)
    expect(workersOf(run)).toEqual([survivor])
    expect(run.child.exitCode).toBeNull()
    // A stop while a restart waits: nothing is restarted, and the primary exits 0.
    run.child.kill('SIGTERM')
    expect(await run.exited).toBe(0)
  })

  it('replaces at once the last worker alive that served, whatever the deaths before it: the port never goes dark for the back-off (attack66 F4)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    // Five deaths within the minute, each while the other worker serves: restarted later and later (up to 4 s).
    for (let death = 1; death <= 5; death++) {
      const victim = workersOf(run)[0]!
      process.kill(victim, 'SIGKILL')
      await untilStderr(run, (text) => text.includes(`is serving (in place of worker ${victim})`))
    }
    // Then both: the last one alive leaves none.
    for (const pid of workersOf(run)) process.kill(pid, 'SIGKILL')
    // Before: "starting another in 8 s", then "in 16 s": nothing listened meanwhile, every connection refused.
    await vi.waitFor(async () => expect((await post(origin, 'k', 'after both')).status).toBe(201), { timeout: 6000, interval: 200 })
    expect(run.stderr()).toMatch(/exited \(killed by SIGKILL\); starting another\n/)
  })

  it('replaces at once the last worker that served when the only other is still starting: the port never goes dark for the back-off (attack69 F5)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    const [first, last] = workersOf(run)
    // Redis held for 3 s: the worker started in place of the first stays starting meanwhile.
    await redis.cli('CLIENT', 'PAUSE', '3000', 'ALL')
    process.kill(first!, 'SIGKILL')
    await vi.waitFor(() => expect(workersOf(run).filter((pid) => pid !== first && pid !== last)).toHaveLength(1), { timeout: 2000, interval: 20 })
    expect(run.stderr()).not.toContain('is serving (in place of')
    process.kill(last!, 'SIGKILL')
    // Before: "starting another in 0.5 s" (the starting one taken for one serving), doubling with each death after.
    await untilStderr(run, (text) => text.includes(`worker ${last} exited`))
    expect(run.stderr()).toContain(`worker ${last} exited (killed by SIGKILL); starting another\n`)
    await vi.waitFor(async () => expect((await post(origin, 'k', 'after both')).status).toBe(201), { timeout: 15_000, interval: 200 })
  })

  it('loses no connection with a worker: requests sent while one worker is stopped, then killed -9, are all answered (issue 20, attack4 H8)', async () => {
    const redis = await startRedis()
    const { run, origin } = await startWorkers(2, redis.url)
    expect((await post(origin, 'k', 'seen')).status).toBe(201)
    const [victim] = workersOf(run)
    // Stopped, the victim takes no connection; killed, it must leave none behind unanswered.
    process.kill(victim!, 'SIGSTOP')
    const { port } = new URL(origin)
    const answers = Array.from({ length: 8 }, () => rawGet(Number(port), 'k'))
    await sleep(500)
    process.kill(victim!, 'SIGKILL')
    // Each answer, or at least a prompt close; within 10 s (a client waits 35 s or forever before).
    const results = await Promise.all(answers.map((answer) => Promise.race([answer, sleep(10_000).then(() => 'no answer within 10 s')])))
    expect(results).toEqual(Array(8).fill('200 [{"id":1,"name":"seen"}]'))
  })

  it('leaves no worker behind when the primary is killed -9', async () => {
    const redis = await startRedis()
    const { run } = await startWorkers(2, redis.url)
    const workers = workersOf(run)
    run.child.kill('SIGKILL')
    await run.exited
    for (let tries = 0; workers.some(existsProcess); tries++) {
      if (tries > 50) throw new Error(`workers still running: ${workers.filter(existsProcess).join(', ')}`)
      await sleep(100)
    }
  })

  it.each([
    { finding: 'attack49 F3', what: 'a worker failing to start while the first serves is replaced; the sandbox serves on', preload: 'process.exit(1)', victim: 'second' },
    { finding: 'attack49 F4', what: 'the first worker dying while the others start is replaced', preload: 'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000)', victim: 'first' },
  ])('once the first worker serves: $what ($finding)', async ({ preload, victim }) => {
    const redis = await startRedis()
    // Run in every process before the CLI (NODE_OPTIONS): the second worker forked fails at its start, or starts slowly.
    const dir = mkdtempSync(join(tmpdir(), 'petstore-workers-preload-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    const count = JSON.stringify(join(dir, 'workers'))
    writeFileSync(
      join(dir, 'preload.cjs'),
      `const fs = require('node:fs'); if (require('node:cluster').isWorker) { fs.appendFileSync(${count}, '.'); if (fs.readFileSync(${count}, 'utf8').length === 2) { ${preload} } }`,
    )
    const port = await freePort()
    const run = runCli(['serve', '--port', String(port), '--workers', '2', '--redis-url', redis.url, '--any-key', '--scenario', 'empty'], { NODE_OPTIONS: `--require ${join(dir, 'preload.cjs')}` })
    const origin = `http://127.0.0.1:${port}`
    await until(async () => (await fetch(`${origin}/__sandbox/health`).catch(() => undefined))?.status === 200)
    if (victim === 'first') {
      const [first] = workersOf(run)
      process.kill(first!, 'SIGKILL')
      // Before: never replaced, nothing said.
      await untilStderr(run, (text) => text.includes(`worker ${first} exited (killed by SIGKILL); starting another`))
    } else {
      // Before: the primary stopped every worker and exited 1.
      await untilStderr(run, (text) => /worker \d+ exited \(exit code 1\); starting another/.test(text))
    }
    await untilStderr(run, (text) => text.includes('is serving (in place of worker'))
    await run.waitFor(READY)
    expect(workersOf(run)).toHaveLength(2)
    expect((await post(origin, 'k', 'after')).status).toBe(201)
    run.child.kill('SIGTERM')
    expect(await run.exited).toBe(0)
  })

  it('reports a port in use once and exits 1', async () => {
    const redis = await startRedis()
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => void taken.close())
    const { port } = taken.address() as AddressInfo
    const { code, stderr } = await runCliToEnd(['serve', '--port', String(port), '--workers', '2', '--redis-url', redis.url])
    expect(code).toBe(1)
    expect(stderr.trimEnd().split('\n')).toEqual([expect.stringContaining('the port is in use')])
  })
})

/** A create on a fresh connection (which any worker may take: each accepts from the shared socket). */
function post(origin: string, key: string, name: string): Promise<Response> {
  return fetch(`${origin}/v1/categories`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' }, body: JSON.stringify({ name }) })
}

/**
 * Waits until 4 creates in a row answer 201, each on a new connection (taken by whichever worker
 * accepts it first: most often both answer, though nothing guarantees it), within 30 s; each
 * worker reconnects to Redis on its own.
 */
async function untilServing(origin: string, run: CliRun): Promise<void> {
  const signal = AbortSignal.timeout(30_000)
  for (let row = 0, i = 0; row < 4; i++) {
    if (signal.aborted) throw new Error(`the workers did not all serve again within 30 s\n${run.stderr()}`)
    const status = (await post(origin, 'k', `after-${i}`)).status
    row = status === 201 ? row + 1 : 0
    if (status !== 201) await sleep(200)
  }
}

/** A GET of the categories on a new raw connection: `"<status> <body>"`, or `"closed"` if the connection closed with no answer. */
function rawGet(port: number, key: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let received = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (received += chunk))
    socket.on('error', () => {})
    socket.on('close', () => {
      const [head = '', body = ''] = received.split('\r\n\r\n')
      resolve(received === '' ? 'closed' : `${head.split(' ')[1]} ${body}`)
    })
    socket.write(`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`)
  })
}

/** Waits until the primary's stderr satisfies `done` (30 s at most). */
/** Kills every worker in turn, each once its replacement serves; then a create is answered 503 storage_unavailable. */
async function replaceEveryWorkerThenRefused(run: CliRun, origin: string): Promise<void> {
  for (const victim of workersOf(run)) {
    process.kill(victim, 'SIGKILL')
    await untilStderr(run, (text) => text.includes(`is serving (in place of worker ${victim})`))
  }
  const answer = await post(origin, 'k', 'while refused')
  expect(answer.status).toBe(503)
  expect(((await answer.json()) as { code: string }).code).toBe('storage_unavailable')
}

/** Waits until `done` holds (each 100 ms, 30 s at most). */
async function until(done: () => Promise<boolean>): Promise<void> {
  const signal = AbortSignal.timeout(30_000)
  while (!(await done())) {
    if (signal.aborted) throw new Error('what was awaited never held')
    await sleep(100)
  }
}

async function untilStderr(run: CliRun, done: (text: string) => boolean): Promise<void> {
  const signal = AbortSignal.timeout(30_000)
  while (!done(run.stderr())) {
    if (signal.aborted) throw new Error(`stderr never showed what was awaited:\n${run.stderr()}`)
    await sleep(100)
  }
}

function existsProcess(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
