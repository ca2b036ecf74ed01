/**
 * The soak: `SOAK_SECONDS` of mixed reads and creates across 50 tenants, against every store
 * (3 s in `npm test`, 10 s in the full run, `PETSTORE_FULL_TESTS=1`). The 60-second run is
 * `npx tsx bench/soak.ts`.
 */
import { describe, expect, it } from 'vitest'
import { soak } from '../../bench/soak-load.js'
import { generator } from '../../src/core/faults.js'
import { DEFAULT_JOURNAL_LIMIT } from '../../src/core/journal.js'
import { STORES } from '../support/stores.js'
import { size } from '../support/test-scale.js'

const SECONDS = size('SOAK_SECONDS', 3, 10)
const TENANTS = 50
const SEED = 7

/**
 * Requests per tenant in a soak of `requests` requests: the soak draws two numbers a request from
 * its seeded generator (tenant, then read or create), so which tenants it reached follows from how
 * many requests it sent, however fast the machine sent them.
 */
function requestsPerTenant(requests: number): number[] {
  const next = generator(SEED)
  const counts = Array.from({ length: TENANTS }, () => 0)
  for (let request = 0; request < requests; request++) {
    counts[Math.floor(next() * TENANTS)]!++
    next()
  }
  return counts
}

describe.each(STORES)('the sandbox under a bounded soak ($name store)', (kind) => {
  it(
    `answers ${SECONDS} s of reads and creates across ${TENANTS} tenants with no 5xx, no lost write, every tenant live and every request journaled`,
    async () => {
      // @note The journal's byte budget (whose dropping is tested on its own) is lifted, so that
      // its entry limit is the only one: a tenant's lists grow with its creates, and at 10 s
      // 1 MiB of them holds fewer entries than the busiest tenant is sent.
      const report = await soak({ seconds: SECONDS, tenants: TENANTS, seed: SEED, journalBytes: 64 * 1024 * 1024, ...kind.sandboxOptions() })
      console.log(`soak (${kind.name}): ${JSON.stringify(report)}`)
      expect(report.requests).toBeGreaterThan(0)
      expect(report.creates).toBeGreaterThan(0)
      expect(report.status5xx).toBe(0)
      expect(report.otherFailures).toBe(0)
      expect(report.lostWrites).toBe(0)
      expect(report.unexpectedWrites).toBe(0)
      const sent = requestsPerTenant(report.requests)
      // Every tenant sent a request is live, none twice; the busiest one's journal holds every
      // request it was sent, up to the journal's limit.
      expect(report.liveTenants).toBe(sent.filter((count) => count > 0).length)
      expect(report.largestJournal).toBe(Math.min(DEFAULT_JOURNAL_LIMIT, Math.max(...sent)))
    },
    SECONDS * 1000 + 60_000,
  )
})
