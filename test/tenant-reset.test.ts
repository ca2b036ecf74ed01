/**
 * A reset is three writes (the store's state, the journal, the planned answers): on Redis each
 * its own script, and a later one can fail after the state was reset. Its answer must then not
 * say "not applied" (storage_unavailable), since the data was reset: the outcome is unknown.
 */
import { expect, it, onTestFinished, vi } from 'vitest'
import { RequestJournal, type TenantJournal } from '../src/core/journal.js'
import { AnswerQueue } from '../src/core/planned-answers.js'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'
import { MemoryStorage } from '../src/storage/memory-storage.js'
import { seedState, StorageUnavailableError, WriteOutcomeUnknownError } from '../src/storage/storage.js'
import { Tenant } from '../src/storage/tenant.js'
import { PetstoreStore } from '../src/storage/memory-store.js'
import { auth, jsonOf, startSandbox } from './support/sandbox-server.js'

const DEFAULT = BUILTIN_SCENARIOS['default']!
const EMPTY = BUILTIN_SCENARIOS['empty']!

/** A journal whose clear fails as Redis's does when Redis refuses it: not applied. */
function refusingJournal(): TenantJournal {
  const journal: TenantJournal = new RequestJournal()
  journal.clear = () => Promise.reject(new StorageUnavailableError('Redis: the clear of the journal was declared not applied'))
  return journal
}

it('answers a reset whose data was reset but whose journal could not be cleared write_outcome_unknown, not storage_unavailable', async () => {
  const storage = new MemoryStorage(seedState(DEFAULT))
  const tenant = new Tenant(DEFAULT, {}, storage.open('t1'), refusingJournal(), Promise.resolve(), new AnswerQueue())
  await tenant.store.createCategory({ name: 'Ferrets' })
  const reset = tenant.resetTo(EMPTY)
  await expect(reset).rejects.toThrow(WriteOutcomeUnknownError)
  await expect(reset).rejects.toThrow(/reset to scenario "empty".*journal/)
  // What the answer tells the client to do, list before retrying, shows the reset applied.
  expect(await tenant.store.listCategories()).toEqual([])
  expect(await tenant.store.scenario()).toBe('empty')
})

it('answers a reset refused before anything was written storage_unavailable, as not applied', async () => {
  const storage = new MemoryStorage(seedState(DEFAULT))
  const store = storage.open('t1')
  const tenant = new Tenant(DEFAULT, {}, store, refusingJournal(), Promise.resolve(), new AnswerQueue())
  store.replace = () => Promise.reject(new StorageUnavailableError('Redis: the reset was declared not applied'))
  const reset = tenant.resetTo(EMPTY)
  await expect(reset).rejects.toThrow(StorageUnavailableError)
  await expect(reset).rejects.not.toThrow(WriteOutcomeUnknownError)
  expect((await store.listCategories()).map((category) => category.name)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})

it('answers a reset applied 200 with the count it made when reading the count after it fails, never 503 storage_unavailable (attack66 F1)', async () => {
  const sandbox = await startSandbox({ apiKeys: ['partner'] })
  expect((await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: 'Ferrets' }) })).status).toBe(201)
  // The read of the count after the reset fails once, as a Redis refusing for a moment makes it.
  const count = vi.spyOn(PetstoreStore.prototype, 'countCategories').mockRejectedValueOnce(new StorageUnavailableError('Redis refuses for a moment'))
  onTestFinished(() => count.mockRestore())
  const reset = await sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ scenario: 'empty' }) })
  // Before: 503 storage_unavailable ("not applied") for a reset applied.
  expect(reset.status).toBe(200)
  expect(await jsonOf(reset)).toMatchObject({ scenario: { name: 'empty' }, categories: 0 })
  expect(count).toHaveBeenCalled()
  expect(await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth('partner') }))).toEqual([])
})
