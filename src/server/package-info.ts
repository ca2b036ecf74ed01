/** The package's own name and version, read from its package.json at run time. */
import { createRequire } from 'node:module'

interface PackageJson {
  readonly name: string
  readonly version: string
}

/** @note Read, not imported: package.json lies outside `rootDir`, two levels up from src/ and dist/ alike. */
export const PACKAGE: PackageJson = createRequire(import.meta.url)('../../package.json') as PackageJson
