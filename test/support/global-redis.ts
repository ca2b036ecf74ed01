/**
 * Vitest global setup: one redis-server for the whole run, for the suites that run against every
 * store (tests keep apart by key prefix). Its URL reaches the tests through `inject('redisUrl')`.
 * It starts nothing outside the full run (`PETSTORE_FULL_TESTS=1`), or without redis-server installed
 * (the Redis suites then fail).
 */
import type { TestProject } from 'vitest/node'
import { HAVE_REDIS, REQUIRE_REDIS, RedisServer, freePort, removeDir } from './redis-server.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

declare module 'vitest' {
  export interface ProvidedContext {
    /** The shared redis-server's URL, or '' when none could be started. */
    redisUrl: string
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!REQUIRE_REDIS || !HAVE_REDIS) {
    project.provide('redisUrl', '')
    return () => Promise.resolve()
  }
  const server = new RedisServer(await freePort(), mkdtempSync(join(tmpdir(), 'petstore-redis-')), {})
  await server.start()
  project.provide('redisUrl', server.url)
  return async () => {
    await server.stop()
    removeDir(server.dir)
  }
}
