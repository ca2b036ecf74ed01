/**
 * Every option of `createPetstore()` judged (`setupPetstoreWorker()`'s: test/browser-entry.test.ts) with a message that names
 * the option, what was received and what is accepted (issue 11: some surfaced raw zod messages
 * such as "Too small: expected array to have >=1 items", and a missing `scenariosDir` was
 * silently ignored).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createPetstore, PetstoreError } from '../src/index.js'

/** The error `make` throws, or a failure when it throws none or something else. */
function thrownBy(make: () => unknown): PetstoreError {
  try {
    make()
  } catch (error) {
    expect(error).toBeInstanceOf(PetstoreError)
    return error as PetstoreError
  }
  throw new Error('expected a PetstoreError, but nothing was thrown')
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'petstore-options-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  return dir
}

describe('createPetstore() options', () => {
  it.each([
    {
      name: 'an empty apiKeys array',
      options: { apiKeys: [] },
      message: "Invalid petstore option apiKeys: expected 'any' or a non-empty array of keys (['t0ken']), received []",
    },
    {
      name: 'a key with a space',
      options: { apiKeys: ['t0ken', 'has space'] },
      message: 'Invalid petstore option apiKeys[1]: expected a non-empty key without spaces (t0ken), received "has space"',
    },
    {
      name: 'a negative latency',
      options: { latency: -5 },
      message: 'Invalid petstore option latency: expected whole milliseconds from 0 to 60000 (50) or a range ({ min: 20, max: 200 }), received -5',
    },
    {
      name: 'a latency range without max',
      options: { latency: { min: 20 } },
      message: 'Invalid petstore option latency.max: expected whole milliseconds from 0 to 60000, received undefined',
    },
    {
      name: 'a latency range with min over max',
      options: { latency: { min: 200, max: 20 } },
      message: 'Invalid petstore option latency: min must not be greater than max, received {"min":200,"max":20}',
    },
    {
      name: 'a fault rate over 1',
      options: { faults: { rate: 2 } },
      message: 'Invalid petstore option faults.rate: expected the share of requests that fail, a number from 0 to 1 (0.1), received 2',
    },
    {
      name: 'an unknown fault outcome',
      options: { faults: { rate: 0.5, outcomes: ['500', '404'] } },
      message: 'Invalid petstore option faults.outcomes[1]: expected "500", "503" or "network", received "404"',
    },
    {
      name: 'an empty outcomes list',
      options: { faults: { rate: 0.5, outcomes: [] } },
      message: 'Invalid petstore option faults.outcomes: expected a non-empty array of "500", "503" or "network", received []',
    },
    {
      name: 'a fractional fault seed',
      options: { faults: { rate: 0.5, seed: 1.5 } },
      message: 'Invalid petstore option faults.seed: expected a whole number, received 1.5',
    },
    {
      name: 'faults: true',
      options: { faults: true },
      message: 'Invalid petstore option faults: expected { rate, outcomes?, seed? } or false, received true',
    },
    {
      name: 'an unknown field in faults',
      options: { faults: { rate: 0.5, rat: 1 } },
      message: 'Invalid petstore option faults: expected { rate, outcomes?, seed? } or false, received unknown field "rat"',
    },
    {
      name: 'an empty baseUrl array',
      options: { baseUrl: [] },
      message:
        "Invalid petstore option baseUrl: expected a base URL ('https://api.shop.test/v1', '*/v1', or '/v1' in a browser) or a non-empty array of them, received []",
    },
    {
      name: 'a byte limit given as a string',
      options: { maxBodyBytes: '1024' },
      message: 'Invalid petstore option maxBodyBytes: expected a whole number of bytes, 1 or more, received "1024"',
    },
    {
      name: 'a misspelt option',
      options: { strcit: true },
      message:
        'Invalid petstore option "strcit": no such option. Known: baseUrl, apiKeys, scenario, scenariosDir, latency, faults, afterSunset, strict, maxBodyBytes, journalLimit, journalBytes, nameMaxLength, descriptionMaxLength, maxCategories, redactHeaders, redactQueryParams',
    },
    {
      name: 'options that are not an object',
      options: 'default',
      message: `Invalid petstore options: expected an object of options such as { baseUrl: '*/v1', scenario: 'default' }, received "default"`,
    },
  ])('refuses $name with invalid_option, naming the option, what came and what is accepted', ({ options, message }) => {
    const error = thrownBy(() => createPetstore(options as never))
    expect(error.code).toBe('invalid_option')
    expect(error.message).toBe(message)
  })

  it.each([
    {
      name: 'a fault rate over 1',
      scenario: { faults: { rate: 2 } },
      message: 'faults.rate: must be a number from 0 to 1 (the share of requests that fail)',
    },
    { name: 'a negative latency', scenario: { latency: -5 }, message: 'latency: must be whole milliseconds from 0 to 60000' },
    {
      name: 'an empty outcomes list',
      scenario: { faults: { rate: 0.5, outcomes: [] } },
      message: 'faults.outcomes: must list at least one of "500", "503", "network"',
    },
  ])('refuses a scenario object with $name in words, not zod’s “Too big”', ({ scenario, message }) => {
    const error = thrownBy(() => createPetstore({ scenario: { name: 'shop', version: '1.0.0', description: 'A shop', ...scenario } as never }))
    expect(error.code).toBe('invalid_scenario')
    expect(error.message).toBe(`Invalid scenario (scenario object): ${message}`)
  })

  it('refuses a scenariosDir that does not exist at once, instead of falling back to the built-in scenarios', async () => {
    const missing = join(await tempDir(), 'scenarios')
    const error = thrownBy(() => createPetstore({ scenariosDir: missing }))
    expect(error.code).toBe('invalid_option')
    expect(error.message).toBe(`Invalid petstore option scenariosDir: expected the path of a directory, received ${JSON.stringify(missing)}, which cannot be read (ENOENT)`)
  })

  it('refuses a scenariosDir that is a file', async () => {
    const file = join(await tempDir(), 'shop.json')
    await writeFile(file, '{}')
    const error = thrownBy(() => createPetstore({ scenariosDir: file }))
    expect(error.code).toBe('invalid_option')
    expect(error.message).toBe(`Invalid petstore option scenariosDir: expected the path of a directory, received ${JSON.stringify(file)}, which is not a directory`)
  })

  it('accepts an existing scenariosDir and still finds the built-in scenarios through it', async () => {
    const petstore = createPetstore({ scenariosDir: await tempDir(), scenario: 'empty' })
    await petstore.ready
    expect(petstore.scenario.name).toBe('empty')
  })
})
