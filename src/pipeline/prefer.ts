/**
 * The `Prefer` preferences of Prism that fit a stateful sandbox: `code=<status>` forces an
 * outcome, `delay=<ms>` delays it. Prism's `example=` and `dynamic=` (and `return=`) are
 * ignored: answers come from the store, not from examples (docs/library.md, "Simulating trouble", says so).
 */
import { answerableStatuses } from '../contract/operations.js'
import type { Operation } from './operation.js'

export interface Preferences {
  readonly code?: number
  readonly delay?: number
}

export type PreferResult = { readonly ok: true; readonly value: Preferences } | { readonly ok: false; readonly reason: string }

/** @default 60000 ms: the longest `Prefer: delay` of the library; the server's is its request timeout. */
export const DEFAULT_MAX_DELAY_MS = 60_000

/** Reads the preferences `operation` honours: a status it declares, a delay from 0 to `maxDelay` ms. */
export function readPrefer(header: string | null, operation: Operation, maxDelay = DEFAULT_MAX_DELAY_MS): PreferResult {
  if (header === null) return { ok: true, value: {} }
  const outcomes = answerableStatuses(operation)
  const value: { code?: number; delay?: number } = {}
  for (const part of header.split(/[,;]/)) {
    const [rawName, rawValue] = part.split('=', 2).map((piece) => piece.trim())
    if (!rawName || rawValue === undefined) continue
    const name = rawName.toLowerCase()
    if (name !== 'code' && name !== 'delay') continue
    const number = /^\d{1,6}$/.test(rawValue) ? Number(rawValue) : Number.NaN
    if (name === 'code') {
      if (!outcomes.includes(number)) {
        return {
          ok: false,
          reason: `code=${rawValue} is not an outcome of ${operation.method} ${operation.path}; use one of ${outcomes.join(', ')}`,
        }
      }
      value.code = number
    } else {
      if (!(number <= maxDelay)) {
        return { ok: false, reason: `delay=${rawValue} must be a whole number of milliseconds from 0 to ${maxDelay}` }
      }
      value.delay = number
    }
  }
  return { ok: true, value }
}
