/**
 * What `petstore-sandbox/browser` needs beyond msw, loaded as a chunk of its own: the petstore
 * (zod, @msw/data, the embedded scenarios, the pipeline) and its session persistence.
 * `src/browser.ts` imports it with a top-level `await import()`, so a bundler emits it as a
 * separate file while every export of the entry stays synchronous.
 */
export { createPetstore } from '../petstore.js'
export { persistInSession, PERSIST_STORAGE_KEY } from './session-persistence.js'
export { BUILTIN_SCENARIO_NAMES } from '../scenario/scenario-loader.js'
