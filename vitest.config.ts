import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The packed-package consumers run in their own projects (npm run check:package).
    exclude: ['test/package-consumer/**', 'test/consumers/**', 'node_modules/**'],
    // @note Most test files wait on sockets, timers and child processes rather than on the CPU:
    // two files a core (vitest's default, one less than the cores, runs one at a time on 2 cores).
    maxWorkers: Math.max(2, availableParallelism() * 2),
    // A backstop only: a test bounds its own waits (AbortSignal.timeout) and says what it waited
    // for; this leaves room for a loaded 2-core machine running files side by side.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: 'test-results/results.json' }]],
    // dist/ rebuilt when src/ is newer (the spawned CLI tests run the binary), and one
    // redis-server for the suites that run against every store in the full run.
    globalSetup: ['test/support/global-build.ts', 'test/support/global-redis.ts'],
  },
})
