/** The JSON shapes test/heap-weight.test.ts weighs against V8's measured heap (test/support/heap-probe.ts). */

/**
 * Adversarial JSON bodies of up to 64 KiB (the journal's body limit), each copy distinct (`i`), as
 * an attacker sends them: V8 shares property names and hidden classes between equal copies.
 */
export const SHAPES: Readonly<Record<string, (i: number) => string>> = {
  'one long property name': (i) => `{"${i}${'k'.repeat(64_000)}":0}`,
  'one long two-byte property name': (i) => `{"${i}${'✓'.repeat(32_000)}":0}`,
  'one property name of lone surrogates': (i) => `{"${i}${'\\ud800'.repeat(10_000)}":0}`,
  '30 long property names': (i) => `{${Array.from({ length: 30 }, (_, j) => `"${i}_${j}${'q'.repeat(2000)}":1`).join(',')}}`,
  '100 distinct property names (fast mode)': (i) => `{${Array.from({ length: 100 }, (_, j) => `"k${i}_${j}":1`).join(',')}}`,
  '5,000 property names (dictionary mode)': (i) => `{${Array.from({ length: 5000 }, (_, j) => `"k${i}_${j}":1`).join(',')}}`,
  '3,000 objects of one distinct name each': (i) => `[${Array.from({ length: 3000 }, (_, j) => `{"a${i}_${j}":0}`).join(',')}]`,
  'arrays nested 250 deep': (i) => `${'['.repeat(250)}${i}${']'.repeat(250)}`,
  'objects nested 250 deep, distinct names': (i) => {
    let text = String(i)
    for (let depth = 0; depth < 250; depth++) text = `{"k${i}_${depth}":${text}}`
    return text
  },
  '21,800 empty objects': (i) => `[${i},${Array.from({ length: 21_800 }, () => '{}').join(',')}]`,
  '21,800 empty arrays': (i) => `[${i},${Array.from({ length: 21_800 }, () => '[]').join(',')}]`,
  'a wide array of small integers': (i) => `[${i},${Array.from({ length: 32_000 }, () => '0').join(',')}]`,
  'a wide array of numbers, strings and nulls': (i) => `[${i},${Array.from({ length: 10_000 }, () => '1.5,"x",null').join(',')}]`,
  'a wide array of distinct short strings': (i) => `[${Array.from({ length: 10_000 }, (_, j) => `"s${i}_${j}"`).join(',')}]`,
  'a long Latin-1 string': (i) => `"${i}${'x'.repeat(64_000)}"`,
  'a long two-byte string': (i) => `"${i}${'✓'.repeat(32_000)}"`,
  'a string of lone surrogates': (i) => `"${i}${'\\udc00'.repeat(10_000)}"`,
  '500 categories': (i) => JSON.stringify(Array.from({ length: 500 }, (_, j) => ({ id: j + 1, name: `Category ${i} ${j}`, description: `Generated category number ${j}` }))),
}
