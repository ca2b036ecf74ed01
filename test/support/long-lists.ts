/**
 * What the tests of long answers share: a scenario of control characters, and what the process
 * holds now, measured after a full collection.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import type { ScenarioInput } from '../../src/scenario/scenario-loader.js'

/**
 * Control characters, each name with one character above Latin-1 (attack8 B1's lists): 13 MB of
 * JSON (`\u0001` for each, 12 bytes a character in a two-byte string), about 26 MB of heap as a
 * whole answer's text.
 */
export const CONTROL_LIST: ScenarioInput = {
  name: 'control-list',
  version: '1.0.0',
  description: 'Categories of control characters.',
  seed: { categories: { generate: { count: 1000, name: `Ā{n}${'\x01'.repeat(190)}`, description: `${'\x01'.repeat(1990)}{n}` } } },
}

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** What this process holds now (heap and memory outside it, such as socket write queues), after a collection. */
export function heldNow(): number {
  gc()
  gc()
  const usage = process.memoryUsage()
  return usage.heapUsed + usage.external
}
