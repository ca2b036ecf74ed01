/**
 * What the test run covers, and at what size. `npm test` by default runs every test file against
 * the memory and SQLite stores, with small loads, to stay a quick loop; the full run
 * (`PETSTORE_FULL_TESTS=1`, which `.ci/run` sets, and the default under `CI`) adds the Redis store
 * and Redis Cluster, the replicas behind nginx, and the attack replays ({@link REPLAYS}), and runs the
 * soak, floods and fuzzing at full size.
 * An explicit size variable wins either way (`SOAK_SECONDS=60 npx vitest run test/server/soak.test.ts`).
 */

/** `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`; undefined when unset or empty. */
function flag(name: string): boolean | undefined {
  const value = process.env[name]?.trim()
  if (value === undefined || value === '') return undefined
  if (/^(1|true|yes|on)$/i.test(value)) return true
  if (/^(0|false|no|off)$/i.test(value)) return false
  throw new Error(`${name} must be 1 or 0 (true/false, yes/no, on/off), got "${value}"`)
}

/** Whether this is the full run: `PETSTORE_FULL_TESTS=1`, or `CI` set (unless `PETSTORE_FULL_TESTS=0`). */
export const FULL_TESTS = flag('PETSTORE_FULL_TESTS') ?? Boolean(process.env['CI'])

/**
 * Whether the replays of attacks at the size that found them run: a real small disk filled and
 * freed, heaps measured, floods of bodies, lists or pipelined requests, stalled disks; seconds
 * each. The full run has them; the quick `npm test` reports them skipped, to stay a loop of about
 * a minute and a half; the rules they replay are then tested by the full run alone (CI runs it).
 */
export const REPLAYS = FULL_TESTS

/** A positive number from `name`, else `full` in the full run and `quick` otherwise. */
export function size(name: string, quick: number, full: number): number {
  const text = process.env[name]
  if (text === undefined || text.trim() === '') return FULL_TESTS ? full : quick
  const value = Number(text)
  if (!(Number.isFinite(value) && value > 0)) throw new Error(`${name} must be a positive number, got "${text}"`)
  return value
}
