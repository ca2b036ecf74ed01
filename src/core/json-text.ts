/**
 * What the JSON text of a category list takes, computed without making it: how many UTF-16 units
 * `JSON.stringify` writes for each category (escapes included) and what the text holds on V8's heap.
 */

/** The units of a category's JSON beside its strings' own: `{"id":9007199254740991,"name":"","description":""},`. */
export const CATEGORY_JSON_FRAME = 64
/** Any character `JSON.stringify` may escape (controls, `"`, `\`, surrogates: a lone one as `\udxxx`): any but those it never escapes. */
const ESCAPED = /[^\x20\x21\x23-\x5b\x5d-\ud7ff\ue000-\uffff]/
const SHORT_ESCAPES = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x22, 0x5c])
const BEYOND_LATIN1 = /[\u0100-\uffff]/

/** How many UTF-16 units `JSON.stringify(text)` makes of `text`, quotes included, without making it. */
export function jsonUnits(text: string): number {
  if (!ESCAPED.test(text)) return text.length + 2
  let units = 2
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x20) units += SHORT_ESCAPES.has(unit) ? 2 : 6
    else if (unit === 0x22 || unit === 0x5c) units += 2
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      units += 2
      i++
    } else units += unit >= 0xd800 && unit <= 0xdfff ? 6 : 1
  }
  return units
}

/** The units a category takes in a list's JSON text, at most: its frame ({@link CATEGORY_JSON_FRAME}) and its strings as `JSON.stringify` writes them. */
export function categoryJsonUnits(category: { readonly name: string; readonly description?: string | undefined }): number {
  return CATEGORY_JSON_FRAME + jsonUnits(category.name) + (category.description === undefined ? 0 : jsonUnits(category.description))
}

/** Whether a category holds a character above Latin-1: a JSON text holding it is two bytes a unit. */
export function beyondLatin1(category: { readonly name: string; readonly description?: string | undefined }): boolean {
  return BEYOND_LATIN1.test(category.name) || (category.description !== undefined && BEYOND_LATIN1.test(category.description))
}

/**
 * What a JSON text of `units` UTF-16 units holds on the heap: one byte a unit, two once it holds a
 * character above Latin-1 (`twoByte`), and a 32nd more.
 * @note The 32nd: V8 builds a long text from pieces, which hold about 1% more (measured by `test/support/heap-probe.ts list`).
 */
export function jsonTextBytes(units: number, twoByte: boolean): number {
  const text = units * (twoByte ? 2 : 1)
  return text + Math.ceil(text / 32)
}
