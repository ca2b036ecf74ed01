/**
 * The in-process half of the scale bench, run by `bench/scale.ts` in a process of its own with
 * `--expose-gc` so that heap figures are read after a full collection. Prints one JSON object.
 *
 *   node --expose-gc --import tsx bench/scale-worker.ts [creates] [tenants]
 *
 * It measures `dist/` (`npm run build` first).
 */
import type * as Library from '../src/index.js'
import type * as Server from '../src/server.js'

// @note The built package, as users run it: the build gives @msw/data its record ids
// (`src/core/random-uuid.ts`), which the sources run through tsx would not.
const { createPetstore } = (await import(new URL('../dist/index.js', import.meta.url).href)) as typeof Library
const { createSandboxApp } = (await import(new URL('../dist/server.js', import.meta.url).href)) as typeof Server

const creates = Number(process.argv[2] ?? 100_000)
const tenantCount = Number(process.argv[3] ?? 1000)
const WINDOW = 1000

const gc = (globalThis as { gc?: () => void }).gc
if (!gc) throw new Error('run with node --expose-gc')

/** Heap in use after full collections, in bytes. */
function heapUsed(): number {
  for (let i = 0; i < 3; i++) gc!()
  return process.memoryUsage().heapUsed
}

// 1. Creates one by one, through the library's create (the same validation as POST) into the store.
// A throwaway store first, so that the first measured window is not the JIT warming up.
const warmUp = createPetstore({ scenario: 'empty', apiKeys: ['bench'] })
for (let i = 1; i <= WINDOW; i++) await warmUp.categories.create({ name: `Warm-up ${i}` })
const petstore = createPetstore({ scenario: 'empty', apiKeys: ['bench'] })
await petstore.ready
const heapBefore = heapUsed()
const windows: number[] = []
let windowStart = performance.now()
for (let i = 1; i <= creates; i++) {
  await petstore.categories.create({ name: `Category ${i}`, description: `Generated category number ${i}` })
  if (i % WINDOW === 0) {
    windows.push(performance.now() - windowStart)
    windowStart = performance.now()
  }
}
const heapAfter = heapUsed()
const stored = (await petstore.categories.list()).length
if (stored !== creates) throw new Error(`stored ${stored} categories, expected ${creates}`)

// 2. Idle tenants of the standalone server, each seeded from the default scenario.
const sandbox = await createSandboxApp({ anyKey: true, maxTenants: tenantCount * 2, demoDir: false })
// A resolved tenant is in use until left (as a request's would be).
const visit = async (key: string) => {
  const tenant = await sandbox.tenants.resolve(key)
  await tenant?.store.countCategories()
  tenant?.leave()
}
await visit('warm-up')
const tenantsBefore = heapUsed()
for (let i = 0; i < tenantCount; i++) await visit(`partner-key-${i}`)
const tenantsAfter = heapUsed()
if (sandbox.tenants.size !== tenantCount + 1) throw new Error(`${sandbox.tenants.size} tenants live, expected ${tenantCount + 1}`)

process.stdout.write(
  `${JSON.stringify({
    creates,
    windowMs: windows,
    bytesPerCategory: (heapAfter - heapBefore) / creates,
    tenants: tenantCount,
    bytesPerTenant: (tenantsAfter - tenantsBefore) / tenantCount,
  })}\n`,
)
