// Loaded with `node --import`: makes `better-sqlite3` unresolvable, as for a library user who
// never installed the optional peer dependency.
import { register } from 'node:module'

register(
  `data:text/javascript,${encodeURIComponent(`
    export async function resolve(specifier, context, next) {
      if (specifier === 'better-sqlite3') {
        const error = new Error("Cannot find package 'better-sqlite3' imported from " + context.parentURL)
        error.code = 'ERR_MODULE_NOT_FOUND'
        throw error
      }
      return next(specifier, context)
    }
  `)}`,
)
