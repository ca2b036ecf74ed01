/** Collects the unhandled rejections of the test that calls it: a test asserting none catches a crash path. */
import { afterAll, expect, onTestFinished } from 'vitest'

export function unhandledRejections(): unknown[] {
  const seen: unknown[] = []
  const listener = (reason: unknown) => seen.push(reason)
  process.on('unhandledRejection', listener)
  onTestFinished(() => void process.off('unhandledRejection', listener))
  return seen
}

/** Fails the test file, once it has run, when anything in it left an unhandled rejection. */
export function failOnUnhandledRejections(): void {
  const seen: unknown[] = []
  const listener = (reason: unknown) => seen.push(reason)
  process.on('unhandledRejection', listener)
  afterAll(() => {
    process.off('unhandledRejection', listener)
    expect(seen).toEqual([])
  })
}
