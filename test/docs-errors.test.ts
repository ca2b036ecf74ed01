/**
 * The guides name what the server answers: docs/errors.md a row for every code of the error table,
 * with its status; docs/limits.md, beside every status a limit answers, the code a client gets
 * with it, from the same table.
 */
import { readFileSync } from 'node:fs'
import { expect, it } from 'vitest'
import { ERROR_TABLE } from '../src/contract/errors.js'

const guide = (name: string) => readFileSync(new URL(`../docs/${name}`, import.meta.url), 'utf8')

/** The status the error table gives `code`, or undefined for a name that is not one of its codes. */
function statusOf(code: string): number | undefined {
  return Object.hasOwn(ERROR_TABLE, code) ? ERROR_TABLE[code as keyof typeof ERROR_TABLE].status : undefined
}

const STATUSES: ReadonlySet<number> = new Set(Object.values(ERROR_TABLE).map((spec) => spec.status))

it('docs/errors.md has a row for every code of the error table, with its status, and none for a code it lacks', () => {
  const rows = guide('errors.md')
    .split('\n')
    .flatMap((line) => {
      const row = /^\| `([a-z_]+)` \| (\d{3}) \|/.exec(line)
      return row ? [{ code: row[1]!, status: Number(row[2]) }] : []
    })
  expect(rows.length).toBeGreaterThan(30)
  const documented = new Map(rows.map(({ code, status }) => [code, status]))
  expect(Object.entries(ERROR_TABLE).filter(([code, spec]) => documented.get(code) !== spec.status).map(([code]) => code)).toEqual([])
  expect(rows.filter(({ code, status }) => statusOf(code) !== status)).toEqual([])
})

it("docs/limits.md names, in each Past it cell of its table, the error table's code of every status the cell gives", () => {
  const cells = guide('limits.md')
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| Limit |'))
    .map((line) => line.split(' | ').at(-1)!)
  expect(cells.length).toBeGreaterThan(15)
  const unnamed = cells.flatMap((cell) => {
    const named = new Set([...cell.matchAll(/`([a-z_]+)`/g)].map((match) => statusOf(match[1]!)))
    const statuses = [...cell.matchAll(/(?<![\w,.:-])(\d{3})(?![\w.-]|,\d)/g)].map((match) => Number(match[1])).filter((status) => STATUSES.has(status))
    return statuses.filter((status) => !named.has(status)).map((status) => `${status} in "${cell.slice(0, 60)}…"`)
  })
  expect(unnamed).toEqual([])
})
