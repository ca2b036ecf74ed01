import { expect, it } from 'vitest'
import { stringWeight } from '../src/core/heap-weight.js'

// V8 keeps a string one byte a character while every character is Latin-1 (up to U+00FF), two
// bytes otherwise; a string's header is 16 bytes and objects are 8-aligned.
it('weighs Latin-1 text one byte a character, up to U+00FF included', () => {
  expect(stringWeight('')).toBe(16)
  expect(stringWeight('Ferrets')).toBe(24)
  expect(stringWeight('x'.repeat(100) + '\u00ff')).toBe(120)
  expect(stringWeight('café, naïve, ÿ')).toBe(32)
})

it('weighs text holding any character past Latin-1 two bytes a character, wherever it is', () => {
  const latin1 = 'x'.repeat(100)
  for (const beyond of ['\u0100', '✓', '\uffff', '🐈']) {
    const weight = 16 + (latin1.length + beyond.length) * 2
    const aligned = Math.ceil(weight / 8) * 8
    expect(stringWeight(beyond + latin1)).toBe(aligned)
    expect(stringWeight(latin1 + beyond)).toBe(aligned)
  }
  // A lone surrogate (JSON.parse makes one from "\ud800") is a UTF-16 unit past Latin-1 too.
  const lone = JSON.parse('"\\ud800"') as string
  expect(stringWeight(latin1 + lone)).toBe(224)
  expect(stringWeight('\udfff' + latin1)).toBe(224)
})
