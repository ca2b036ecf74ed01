/**
 * petstore-sandbox: the environment-free core. Import it anywhere msw runs; add the runtime
 * entry (`petstore-sandbox/node`) for a ready-wired `setupServer`.
 */
export { createPetstore } from './library/petstore.js'
export { PetstoreError } from './core/petstore-error.js'
export { WaitForTimeoutError } from './core/journal-wait.js'
export { ERROR_TABLE, apiError } from './contract/errors.js'
export { NewCategory as NewCategorySchema, Category as CategorySchema, ApiError as ApiErrorSchema } from './contract/schemas.js'
export { buildOpenApiDocument } from './contract/openapi.js'
export { loadScenario, listScenarioNames, BUILTIN_SCENARIO_NAMES } from './scenario/scenario-loader.js'
export { ScenarioFile as ScenarioFileSchema } from './contract/scenario-format.js'
export {
  DEFAULT_REDACTED_HEADERS,
  DEFAULT_REDACTED_QUERY_PARAMS,
  DEFAULT_READABLE_NAMES,
  CREDENTIAL_NAME_PATTERN,
} from './core/redaction.js'

export type { Petstore, PetstoreOptions, ResetOptions } from './library/petstore.js'
export type { PetstoreErrorCode } from './core/petstore-error.js'
export type { ErrorCode } from './contract/errors.js'
export type { Category, NewCategory, ApiError, Pet, Order } from './contract/schemas.js'
export type { JournalEntry, JournalFilter, JournalBody } from './core/journal.js'
export type { AnswerPlan, PendingAnswer } from './core/planned-answers.js'
export type { OperationId } from './contract/operations.js'
export type { Scenario, ScenarioFile, SeedData, Latency, Faults } from './contract/scenario-format.js'
export type { ScenarioInput, BuiltinScenarioName, LoadScenarioOptions } from './scenario/scenario-loader.js'
export type { JournalMatch } from './core/journal-match.js'
export type { OperationJournalEntry, TypedJournalEntry, JournalEntryOf, SuccessBodyOf } from './core/journal-entry-types.js'
export type { WaitForOptions } from './core/journal-wait.js'
export type { JournalMethod } from './core/journal-filter.js'
