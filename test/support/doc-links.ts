/**
 * The relative links of Markdown documents, checked as GitHub resolves them: the file or folder
 * a link names exists, and its `#anchor` is the slug GitHub gives one of that file's headings.
 */
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'

/** What a document's text is outside fenced code blocks and inline code, line by line. */
function proseLines(text: string): string[] {
  let fence = false
  return text.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fence = !fence
      return ''
    }
    return fence ? '' : line.replace(/`+[^`]*`+/g, (code) => code.replace(/[[\]()]/g, ' '))
  })
}

/**
 * The anchors GitHub makes for a document's headings: lower case, punctuation but `-` and `_`
 * dropped, spaces made `-`; a repeated slug gets `-1`, `-2`…
 * @example headingSlugs('## The admin API (`/__sandbox/`)') // ['the-admin-api-__sandbox']
 */
export function headingSlugs(text: string): string[] {
  const seen = new Map<string, number>()
  let fence = false
  const slugs: string[] = []
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence
    const heading = fence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const title = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    const base = title
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    slugs.push(count === 0 ? base : `${base}-${count}`)
  }
  return slugs
}

/**
 * Every relative link of the files that does not resolve, as `file:line: target (why)`.
 * @example brokenLinks(['README.md'], root) // [] when every link resolves
 */
export function brokenLinks(files: readonly string[], root: string): string[] {
  const broken: string[] = []
  for (const file of files) {
    const path = resolve(root, file)
    const text = readFileSync(path, 'utf8')
    proseLines(text).forEach((line, index) => {
      for (const [, target] of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue
        const [place, anchor] = target!.split('#', 2) as [string, string | undefined]
        const linked = place === '' ? path : resolve(dirname(path), decodeURIComponent(place))
        const where = `${file}:${index + 1}: ${target}`
        if (!existsSync(linked)) {
          broken.push(`${where} (no ${relative(root, linked)})`)
          continue
        }
        if (anchor === undefined) continue
        if (statSync(linked).isDirectory() || !linked.endsWith('.md')) {
          broken.push(`${where} (an anchor into ${relative(root, linked)}, which is not a Markdown file)`)
          continue
        }
        if (!headingSlugs(readFileSync(linked, 'utf8')).includes(anchor)) broken.push(`${where} (no heading of ${relative(root, linked)} has the anchor #${anchor})`)
      }
    })
  }
  return broken
}
