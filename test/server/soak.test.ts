/**
 * The soak in CI: `SOAK_SECONDS` (default 10) of mixed reads and creates across 50 tenants, in
 * memory and with a data directory (SQLite). The 60-second run is `npx tsx bench/soak.ts`.
 */
import { describe, expect, it } from 'vitest'
import { soak } from '../../bench/soak-load.js'
import { STORES } from '../support/stores.js'

const SECONDS = Number(process.env['SOAK_SECONDS'] ?? 10)

describe.each(STORES)('the sandbox under a bounded soak ($name store)', (kind) => {
  it(
    `answers ${SECONDS} s of reads and creates across 50 tenants with no 5xx, no lost write and bounded caches`,
    async () => {
      const report = await soak({ seconds: SECONDS, tenants: 50, ...kind.sandboxOptions() })
      console.log(`soak (${kind.name}): ${JSON.stringify(report)}`)
      expect(report.requests).toBeGreaterThan(0)
      expect(report.creates).toBeGreaterThan(0)
      expect(report.status5xx).toBe(0)
      expect(report.otherFailures).toBe(0)
      expect(report.lostWrites).toBe(0)
      expect(report.unexpectedWrites).toBe(0)
      expect(report.liveTenants).toBeLessThanOrEqual(50)
      expect(report.largestJournal).toBeLessThanOrEqual(1000)
    },
    SECONDS * 1000 + 60_000,
  )
})
