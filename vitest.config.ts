import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The packed-package consumer runs in its own project (npm run check:package).
    exclude: ['test/package-consumer/**', 'node_modules/**'],
    // Integration tests spawn servers and child processes; give them room on 2-core CI.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // One redis-server for the suites that run against every store (the Redis store among them).
    globalSetup: ['test/support/global-redis.ts'],
    reporters: ['default', ['json', { outputFile: 'test-results/results.json' }]],
  },
})
