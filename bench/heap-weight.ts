/**
 * `npx tsx bench/heap-weight.ts`: what parsed JSON bodies really hold on V8's heap, next to what
 * `heapWeight()` estimates for them (the journal's and the memory budget's count). An estimate
 * under the measured figure would let a journal hold more than its budget. Then what weighing a
 * text costs (`stringWeight`, run on every body and answer the journal keeps).
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { heapWeight, stringWeight } from '../src/core/heap-weight.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
const COPIES = 100

/** Heap bytes per copy of what `make` returns, after full collections. */
function measured(make: () => unknown): number {
  gc()
  gc()
  const before = process.memoryUsage().heapUsed
  const kept: unknown[] = []
  for (let i = 0; i < COPIES; i++) kept.push(make())
  gc()
  gc()
  const after = process.memoryUsage().heapUsed
  if (kept.length !== COPIES) throw new Error('unreachable')
  return Math.round((after - before) / COPIES)
}

const texts: Record<string, string> = {
  '64 KiB of [{},{},…]': `[${Array.from({ length: 21_800 }, () => '{}').join(',')}]`,
  '64 KiB of [[],[],…]': `[${Array.from({ length: 21_800 }, () => '[]').join(',')}]`,
  '64 KiB of [0,0,…]': `[${Array.from({ length: 32_700 }, () => '0').join(',')}]`,
  'an object of 5,000 keys': `{${Array.from({ length: 5000 }, (_, i) => `"k${i}":1`).join(',')}}`,
  '1,000 categories': JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ id: i + 1, name: `Category ${i + 1}`, description: `Generated category number ${i + 1}` }))),
  'a NewCategory': '{"name":"Ferrets","description":"Small, curious, and fond of tubes"}',
}

process.stdout.write(`${'body'.padEnd(26)} ${'text'.padStart(8)} ${'measured'.padStart(10)} ${'estimated'.padStart(10)}  ratio\n`)
for (const [name, text] of Object.entries(texts)) {
  const heap = measured(() => JSON.parse(text))
  const estimate = heapWeight(JSON.parse(text))
  process.stdout.write(
    `${name.padEnd(26)} ${String(text.length).padStart(8)} ${String(heap).padStart(10)} ${String(estimate).padStart(10)}  ${(estimate / heap).toFixed(2)}\n`,
  )
}

process.stdout.write(`\n${'stringWeight of'.padEnd(26)} ${'text'.padStart(8)} ${'ns a call'.padStart(10)}\n`)
const weighed: Record<string, string> = {
  'a NewCategory': texts['a NewCategory']!,
  'a 64 KiB answer': texts['1,000 categories']!.slice(0, 64 * 1024),
  'a 64 KiB answer, one ✓': `${texts['1,000 categories']!.slice(0, 64 * 1024 - 1)}✓`,
}
for (const [name, text] of Object.entries(weighed)) {
  const calls = text.length > 1024 ? 2_000 : 200_000
  let total = 0
  const started = performance.now()
  for (let i = 0; i < calls; i++) total += stringWeight(text)
  const ns = ((performance.now() - started) * 1e6) / calls
  if (total === 0) throw new Error('unreachable')
  process.stdout.write(`${name.padEnd(26)} ${String(text.length).padStart(8)} ${ns.toFixed(1).padStart(10)}\n`)
}
