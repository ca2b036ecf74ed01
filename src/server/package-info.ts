/** The package's own name and version, and its folder, found from this module at run time. */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

interface PackageJson {
  readonly name: string
  readonly version: string
}

/**
 * The folder holding the package's package.json.
 * @note Searched upwards, not a fixed `../../`: this module runs from `src/server/` in the
 * repository and from a bundle in `dist/` once built, one level shallower.
 */
export const PACKAGE_ROOT: string = findPackageRoot(dirname(fileURLToPath(import.meta.url)))

/** @note Read, not imported: package.json lies outside `rootDir`. */
export const PACKAGE: PackageJson = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as PackageJson

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json')
    if (existsSync(file) && (JSON.parse(readFileSync(file, 'utf8')) as Partial<PackageJson>).name === 'petstore-sandbox') return dir
    if (dirname(dir) === dir) throw new Error(`petstore-sandbox: cannot find its package.json above ${from}`)
  }
}
