/** Collects the unhandled rejections of the test that calls it: a test asserting none catches a crash path. */
import { onTestFinished } from 'vitest'

export function unhandledRejections(): unknown[] {
  const seen: unknown[] = []
  const listener = (reason: unknown) => seen.push(reason)
  process.on('unhandledRejection', listener)
  onTestFinished(() => void process.off('unhandledRejection', listener))
  return seen
}
