import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The packed-package consumers run in their own projects (npm run check:package).
    exclude: ['test/package-consumer/**', 'test/consumers/**', 'node_modules/**'],
    // Integration tests spawn servers and child processes; give them room on 2-core CI.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: 'test-results/results.json' }]],
    // dist/ rebuilt when src/ is newer (the spawned CLI tests run the binary), and one
    // redis-server for the suites that run against every store.
    globalSetup: ['test/support/global-build.ts', 'test/support/global-redis.ts'],
  },
})
