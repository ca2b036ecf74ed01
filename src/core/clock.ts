/**
 * The clock durations are measured with in the process: monotonic, so that a step of the
 * machine's clock (NTP, a VM resumed, an operator's `date -s`) neither ages every tenant at once
 * nor keeps them young for good. Wall-clock times (`Date.now()`) are for showing and storing
 * when something happened, never for measuring how long ago.
 *
 * @note Read through the global `performance` at each call (not an import of `node:perf_hooks`),
 * so that tests can drive it with `vi.useFakeTimers({ toFake: ['performance'] })`.
 */

/** Milliseconds on the process's monotonic clock (`performance.now()`): only differences mean anything. */
export function monotonicNow(): number {
  return performance.now()
}
