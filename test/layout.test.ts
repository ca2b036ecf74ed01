/**
 * The layout of src/: each folder is one role, and the folders form a one-way graph
 * (contract → core → storage → pipeline → adapters → server → cli), so a folder can be read
 * knowing only the folders below it. Every import counts: relative, type-only, `export … from`
 * and `import()`. The files at the top of src/ (the package's entry points) count as one folder,
 * `src`, so a folder importing an entry point is a cycle too.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src')

/** `storage` for `src/storage/redis-storage.ts`, `src` for a file at the top of src/. */
function folderOf(file: string): string {
  const parts = relative(SRC, file).split(/[\\/]/)
  return parts.length > 1 ? parts[0]! : 'src'
}

/** Every import between two folders, as `from -> to` with the files that make it. */
function folderImports(): Map<string, Map<string, string[]>> {
  const edges = new Map<string, Map<string, string[]>>()
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'))
  for (const file of files) {
    const path = join(SRC, file)
    const { importedFiles } = ts.preProcessFile(readFileSync(path, 'utf8'), true, true)
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue
      const target = resolve(dirname(path), fileName)
      const from = folderOf(path)
      const to = folderOf(target)
      if (from === to) continue
      const targets = edges.get(from) ?? new Map<string, string[]>()
      edges.set(from, targets)
      const via = targets.get(to) ?? []
      targets.set(to, via)
      via.push(`${relative(SRC, path)} imports ${relative(SRC, target).replace(/\.js$/, '.ts')}`)
    }
  }
  return edges
}

/** The groups of folders that import each other, directly or around a loop (Tarjan's strongly connected components). */
function cycles(edges: Map<string, Map<string, string[]>>): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const found: string[][] = []
  const visit = (folder: string) => {
    index.set(folder, index.size)
    low.set(folder, index.get(folder)!)
    stack.push(folder)
    for (const next of edges.get(folder)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(folder, Math.min(low.get(folder)!, low.get(next)!))
      } else if (stack.includes(next)) {
        low.set(folder, Math.min(low.get(folder)!, index.get(next)!))
      }
    }
    if (low.get(folder) === index.get(folder)) {
      const group = stack.splice(stack.indexOf(folder))
      if (group.length > 1) found.push(group.sort())
    }
  }
  for (const folder of edges.keys()) if (!index.has(folder)) visit(folder)
  return found
}

describe('the layout of src/', () => {
  const edges = folderImports()

  it('sees the imports between folders (type-only and dynamic ones included)', () => {
    // A guard on the reader itself: the server imports the stores, the CLI loads the server.
    expect(edges.get('server')?.has('storage')).toBe(true)
    expect(edges.get('cli')?.has('server')).toBe(true)
  })

  it('has no two folders importing each other', () => {
    const pairs: string[] = []
    for (const [from, targets] of edges) {
      for (const [to, via] of targets) {
        const back = edges.get(to)?.get(from)
        if (back && from < to) pairs.push(`${from} <-> ${to}: ${via[0]}; ${back[0]}`)
      }
    }
    expect(pairs).toEqual([])
  })

  it('has no cycle between folders', () => {
    const described = cycles(edges).map((group) => {
      const steps = group.flatMap((from) =>
        group.filter((to) => edges.get(from)?.has(to)).map((to) => `${from} -> ${to} (${edges.get(from)!.get(to)![0]})`),
      )
      return `${group.join(', ')}: ${steps.join('; ')}`
    })
    expect(described).toEqual([])
  })
})
