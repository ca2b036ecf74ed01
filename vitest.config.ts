import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'
import { FULL_TESTS } from './test/support/test-scale.js'

/**
 * Tests that drive several processes against Redis at once (three sandboxes, nginx, a cluster) or
 * time a Redis restart: run last, one file at a time, in the full run. Without Redis (`npm test`)
 * they hold two quick CLI checks, run with the rest: a group of their own cost ~2 s at the end.
 */
const ALONE = FULL_TESTS ? ['test/redis/replicas.test.ts', 'test/redis/redis-restart.test.ts', 'test/cli/workers.test.ts'] : []

/**
 * Files that mock a module (`vi.mock`): run each in a fresh module graph. Every other file shares
 * its worker's modules with the files the worker ran before it (`isolate: false`): evaluating the
 * sandbox anew per file was most of `npm test`'s time (imports 215 s of CPU, the run 228 s on two
 * cores, against 29 s and 105 s).
 */
const ISOLATED = ['test/server/request-log.test.ts', 'test/browser-entry.test.ts']

export default defineConfig({
  test: {
    // A backstop only: a test bounds its own waits (AbortSignal.timeout) and says what it waited
    // for; this leaves room for a loaded 2-core machine running files side by side.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Files share modules and globals (see ISOLATED): spies and stubbed globals are undone before
    // each test, so one file's never reach the next.
    restoreMocks: true,
    // @note 10 s for expect.poll, not 1 s: a line or a log entry that comes after a socket's close or a child's write
    // was missed within the second on a loaded 2-core machine (a fresh-clone CI beside attackers); a poll that passes
    // takes no longer.
    expect: { poll: { timeout: 10_000 } },
    // Transformed modules kept between runs, under node_modules (vitest --clearCache empties it):
    // a second run transforms only what changed (transform 12 s of CPU down to 3 s, imports 50 s to 34 s).
    experimental: { fsModuleCache: true },
    unstubGlobals: true,
    // @note Most test files wait on sockets, timers and child processes rather than on the
    // CPU: two files a core (vitest's default, one less than the cores, runs one at a time on 2 cores).
    maxWorkers: Math.max(2, availableParallelism() * 2),
    reporters: ['default', ['json', { outputFile: 'test-results/results.json' }]],
    projects: [
      {
        extends: true,
        test: {
          name: 'tests',
          include: ['test/**/*.test.ts'],
          // The packed-package consumers run in their own projects (npm run check:package), and
          // test/shared-setup/ in a vitest of its own (test/shared-setup.test.ts).
          exclude: ['test/package-consumer/**', 'test/consumers/**', 'test/shared-setup/**', 'node_modules/**', ...ALONE, ...ISOLATED],
          isolate: false,
          // dist/ rebuilt when src/ is newer (the spawned CLI tests run the binary), and one
          // redis-server for the suites that run against every store in the full run.
          globalSetup: ['test/support/global-build.ts', 'test/support/global-redis.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'isolated',
          include: ISOLATED,
          globalSetup: ['test/support/global-build.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      ...(ALONE.length === 0
        ? []
        : [
            {
              extends: true as const,
              test: {
                // After every other file, on their own: side by side with other files on a 2-core
                // machine, their loads and restarts measure the machine more than the sandbox.
                name: 'alone',
                include: ALONE,
                maxWorkers: 1,
                globalSetup: ['test/support/global-build.ts'],
                sequence: { groupOrder: 1 },
              },
            },
          ]),
    ],
  },
})
