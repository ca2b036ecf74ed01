/**
 * petstore-sandbox/server: the standalone sandbox, one isolated tenant per API key, as a Node
 * request listener (and an express app to mount). The CLI (`petstore-sandbox serve`) binds it;
 * tests bind it to port 0. `verifyService` checks a live deployment (the real service, or a
 * sandbox) against the same contract; `recordScenario` reads a live service into a scenario
 * (`scenarios record`).
 */
export { createSandboxApp, API_BASE_PATH, ADMIN_BASE_PATH } from './server/create-sandbox-app.js'
export { DEFAULT_TENANT_TTL_DAYS } from './server/sandbox-options.js'
export { DEV_API_KEY, DEFAULT_MAX_TENANTS, displayId, tenantId } from './server/tenant-registry.js'
export { verifyService } from './verify/verify-service.js'
export { formatVerifyJunit, formatVerifyJson, formatVerifyTable } from './verify/verify-report.js'
export { recordScenario } from './scenario/scenario-recorder.js'

export type { SandboxApp } from './server/create-sandbox-app.js'
export type { SandboxAppOptions, SandboxLimits } from './server/sandbox-options.js'
export type { RequestLogEntry } from './server/request-context.js'
export type { CorsOrigins } from './server/cors.js'
export type { ScenarioReload, WatchStatus } from './server/scenario-watcher.js'
export type { RedisEpoch } from './storage/redis-connection.js'
export type { VerifyCheck, VerifyExchange, VerifyOptions, VerifyOutcome, VerifyReport } from './verify/verify-service.js'
export type { RecordScenarioOptions, RecordedScenario, RecordedScenarioFile } from './scenario/scenario-recorder.js'
export type { TenantListing, TenantRegistry } from './server/tenant-registry.js'
export type { StorageHealth, TenantState, TenantStorage, TenantStore, TenantSummary } from './storage/storage.js'
