/** `petstore-sandbox tenants list|delete --data-dir DIR`: what a stopped server keeps on disk. */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { DATABASE_FILE, openSqliteStorage } from '../storage/sqlite-storage.js'
import { UsageError, type CliIo } from './cli-io.js'

/** Lists the stored tenants, or deletes the one whose id starts with `remove`. */
export async function tenantsCommand(dir: string, remove: string | undefined, io: CliIo): Promise<void> {
  // @note Opening a database creates it: a mistyped directory would read as "no tenants".
  if (!existsSync(join(dir, DATABASE_FILE))) throw new UsageError(`${dir} holds no sandbox data (no ${DATABASE_FILE}): check --data-dir`)
  const storage = await openSqliteStorage({ dir, seed: { scenario: '', categories: [], nextCategoryId: 1 } })
  try {
    const stored = await storage.list()
    if (remove === undefined) {
      // @note Nothing at all was printed: a new user could not tell the command had run (trial42). Said on stderr, stdout stays a list.
      if (stored.length === 0) io.stderr(`no stored tenants in ${dir} (a tenant is stored from its first write)\n`)
      for (const tenant of stored) {
        io.stdout(`${tenant.id}  ${tenant.scenario.padEnd(16)} ${String(tenant.categories).padStart(7)} ${tenant.categories === 1 ? 'category  ' : 'categories'}  last used ${new Date(tenant.updatedAt).toISOString()}\n`)
      }
      return
    }
    if (remove.length < 12) throw new UsageError(`Cannot delete tenant "${remove}": give the full id or at least 12 of its digits (see \`tenants list\`)`)
    const matches = stored.filter((tenant) => tenant.id.startsWith(remove))
    if (matches.length !== 1) {
      throw new UsageError(`Cannot delete tenant "${remove}": ${matches.length === 0 ? 'no stored tenant has this id (see `tenants list`)' : 'several tenants start with it; give more digits'}`)
    }
    await storage.delete(matches[0]!.id)
    io.stdout(`deleted tenant ${matches[0]!.id}\n`)
  } finally {
    await storage.close()
  }
}
