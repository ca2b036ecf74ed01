// Loaded with `node --import`: makes `import('redis')` fail as it does where the optional
// dependency is not installed, so the CLI's message for that case can be tested here.
import { register } from 'node:module'

const hook = `export async function resolve(specifier, context, next) {
  if (specifier === 'redis') {
    const error = new Error("Cannot find package 'redis'")
    error.code = 'ERR_MODULE_NOT_FOUND'
    throw error
  }
  return next(specifier, context)
}`
register(`data:text/javascript,${encodeURIComponent(hook)}`)
