/**
 * What `petstore-sandbox/browser` needs beyond msw, loaded as a chunk of its own: the petstore
 * (zod, @msw/data, the embedded scenarios, the pipeline) and its session persistence.
 * `src/browser.ts` loads it with a dynamic `import()` when a worker is set up, so a bundler emits
 * it as a separate file.
 */
export { createPetstore } from '../library/petstore.js'
export { persistInSession } from './session-persistence.js'
