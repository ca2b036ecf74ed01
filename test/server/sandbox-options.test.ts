/**
 * Every bad option of `createSandboxApp()` (and so of `serve`) answered in words: the option,
 * what was received and what is accepted. Before, some surfaced zod's own wording, such as
 * "apiKeys: Too small: expected array to have >=1 items" (a new user's trial).
 */
import { describe, expect, it } from 'vitest'
import { PetstoreError } from '../../src/index.js'
import { createSandboxApp, type SandboxAppOptions } from '../../src/server.js'

async function refusal(options: unknown): Promise<PetstoreError> {
  const error = await createSandboxApp(options as SandboxAppOptions).then(
    () => undefined,
    (thrown: unknown) => thrown,
  )
  expect(error).toBeInstanceOf(PetstoreError)
  expect((error as PetstoreError).code).toBe('invalid_option')
  return error as PetstoreError
}

describe('createSandboxApp() options', () => {
  it.each([
    ['an empty apiKeys', { apiKeys: [] }, "Invalid sandbox option apiKeys: expected a non-empty array of keys (['k1', 'k2']), received []"],
    ['a key with a space', { apiKeys: ['a b'] }, 'Invalid sandbox option apiKeys[0]: expected a non-empty key without spaces (k1), received "a b"'],
    ['an unknown durability', { durability: 'fast' }, `Invalid sandbox option durability: expected 'power-loss' or 'process-crash', received "fast"`],
    ['a fractional maxTenants', { maxTenants: 1.5 }, 'Invalid sandbox option maxTenants: expected a whole number of tenants, 1 or more, received 1.5'],
    ['a negative latency', { latency: -5 }, 'Invalid sandbox option latency: expected whole milliseconds from 0 to 60000 (50) or a range ({ min: 20, max: 200 }), received -5'],
    ['apiKeys with anyKey', { apiKeys: ['k1'], anyKey: true }, 'Invalid sandbox options: apiKeys and anyKey cannot be used together'],
    ['redisReplicas without redisUrl', { redisReplicas: 1 }, 'Invalid sandbox options: redisReplicas needs redisUrl: it is the number of replicas of each Redis master'],
    ['redisAllowEviction without redisUrl', { redisAllowEviction: true }, 'Invalid sandbox options: redisAllowEviction needs redisUrl: it is about the Redis store, and this sandbox keeps its tenants in memory'],
    ['redisAllowFailoverLoss without redisUrl', { dataDir: '/tmp/petstore-sandbox-unused', redisAllowFailoverLoss: true }, 'Invalid sandbox options: redisAllowFailoverLoss needs redisUrl: it is about the Redis store, and this sandbox keeps its tenants in SQLite (dataDir)'],
    ['durability process-crash without dataDir', { durability: 'process-crash' }, 'Invalid sandbox options: durability process-crash needs dataDir: it is when a SQLite write is answered, and this sandbox keeps its tenants in memory'],
    ['storeBudgetBytes without a store', { storeBudgetBytes: 1024 }, 'Invalid sandbox options: storeBudgetBytes needs dataDir or redisUrl: it bounds what a store keeps; in memory, memoryBudgetBytes bounds the tenants'],
    ['redisReplicas with redisAllowFailoverLoss', { redisUrl: 'redis://127.0.0.1:1', redisReplicas: 1, redisAllowFailoverLoss: true }, 'Invalid sandbox options: redisReplicas and redisAllowFailoverLoss cannot be used together: the first waits for that many replicas, the second for none'],
    ['a negative redisReplicas', { redisUrl: 'redis://127.0.0.1:1', redisReplicas: -1 }, 'Invalid sandbox option redisReplicas: expected a whole number of replicas of each Redis master, from 0 to 1000, received -1'],
    ['headers timeout over the request timeout', { headersTimeoutMs: 5000, requestTimeoutMs: 1000 }, 'Invalid sandbox options: headersTimeoutMs must not be greater than requestTimeoutMs'],
    // Before attack39 F5: taken, and the epoch's beat then fell in another slot than its token.
    [
      'a key prefix with a brace on a Redis Cluster',
      { redisUrl: 'redis-cluster://127.0.0.1:1', redisPrefix: 'sandbox}:' },
      'Cannot use the Redis key prefix "sandbox}:" on a Redis Cluster: a { or } in it makes a hash tag of its own, which puts keys the sandbox keeps together in different slots; choose a prefix without braces',
    ],
  ])('refuses %s, naming the option, what came and what is accepted', async (_name, options, message) => {
    expect((await refusal(options)).message).toBe(message)
  })

  it('names every option it knows when one is misspelt', async () => {
    const { message } = await refusal({ apiKey: ['k1'] })
    expect(message).toMatch(/^Invalid sandbox option "apiKey": no such option\. Known: scenario, scenariosDir, apiKeys, anyKey, /)
    // Each option named is one the sandbox accepts: none refused as unknown.
    const known = message.split('Known: ')[1]!.split(', ')
    expect(known).toContain('requestTimeoutMs')
    for (const name of known) {
      const error = await createSandboxApp({ [name]: Symbol('no value') }).then(() => undefined, (thrown: unknown) => thrown)
      expect((error as Error).message, name).not.toMatch(/no such option/)
    }
  })
})
