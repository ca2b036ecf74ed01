import { existsSync } from 'node:fs'
import { defineConfig } from 'vitest/config'

/**
 * The server suites that run a second time on the Redis store (PETSTORE_TEST_STORE): every one but
 * those about one process's HTTP parser (hostile-http) or its data directory (durable-sandbox).
 */
const ON_EVERY_STORE = [
  'test/server/api-over-http.test.ts',
  'test/server/admin-api.test.ts',
  'test/server/tenancy.test.ts',
  'test/server/cors-and-headers.test.ts',
  'test/server/security.test.ts',
  'test/server/storage-findings.test.ts',
  'test/server/express-app.test.ts',
  'test/server/soak.test.ts',
]
// Under CI the Redis project always runs (and fails without redis-server); elsewhere it needs one.
const redis = existsSync('/usr/bin/redis-server') || Boolean(process.env['CI'])

export default defineConfig({
  test: {
    // Integration tests spawn servers and child processes; give them room on 2-core CI.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: 'test-results/results.json' }]],
    // One redis-server for the suites that run against every store (the Redis store among them).
    globalSetup: ['test/support/global-redis.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'default',
          include: ['test/**/*.test.ts'],
          // The packed-package consumer runs in its own project (npm run check:package).
          exclude: ['test/package-consumer/**', 'node_modules/**'],
        },
      },
      ...(redis ? [{ extends: true as const, test: { name: 'redis-store', include: ON_EVERY_STORE, env: { PETSTORE_TEST_STORE: 'redis' } } }] : []),
    ],
  },
})
