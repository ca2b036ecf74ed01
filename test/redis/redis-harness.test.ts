/**
 * The tests' own redis-server (`test/support/redis-server.ts`): a SIGKILL leaves nothing of Redis
 * running. A background AOF rewrite is a forked child that outlives its parent; left running, it
 * renamed its `temp-rewriteaof-bg-*.aof` into the directory while the teardown removed it, and CI
 * failed with `ENOTEMPTY: directory not empty, rmdir '/tmp/petstore-redis-…'`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { REQUIRE_REDIS, removeDir, startRedis } from '../support/redis-server.js'

/** Pids whose command line is Redis's rewrite child for this port (a zombie's is empty). */
function rewriteForks(port: number): number[] {
  const title = `redis-aof-rewrite 127.0.0.1:${port}`
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(title)
      } catch {
        return false
      }
    })
    .map(Number)
}

describe.runIf(REQUIRE_REDIS)("the tests' redis-server", () => {
  it('kills a background AOF rewrite with the server, so that its directory can be removed', async () => {
    const redis = await startRedis({ aof: true })
    await redis.cli('EVAL', "for i = 1, 2000 do redis.call('SET', 'k' .. i, 'v') end", '0')
    // A rewrite slowed to 1 ms a key (Redis's own testing knob): it runs for about 2 s.
    await redis.cli('CONFIG', 'SET', 'rdb-key-save-delay', '1000')
    await redis.cli('BGREWRITEAOF')
    expect(await redis.cli('INFO', 'persistence')).toContain('aof_rewrite_in_progress:1')
    // The child names itself just after the fork: on a loaded machine it may not have yet.
    const named = Date.now() + 5000
    while (rewriteForks(redis.port).length === 0 && Date.now() < named) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(rewriteForks(redis.port)).toHaveLength(1)

    await redis.stop('SIGKILL')

    expect(rewriteForks(redis.port)).toEqual([])
    removeDir(redis.dir)
    expect(existsSync(redis.dir)).toBe(false)
  })
})
