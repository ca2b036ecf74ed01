import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { RequestJournal } from '../src/core/journal.js'
import { PetstoreError, WaitForTimeoutError } from '../src/index.js'
import { call, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('requests.waitFor()', () => {
  it('resolves with the oldest matching entry already in the journal', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Ferrets' } })
    await call('/categories', { body: { name: 'Owls' } })
    const entry = await petstore.requests.waitFor({ operation: 'createCategory' })
    expect(entry.request.body).toEqual({ name: 'Ferrets' })
  })

  it('resolves with a request that arrives after the call, matched by a deep-partial body and asymmetric matchers', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Ferrets' } })
    const waiting = petstore.requests.waitFor({ method: 'post', body: { name: expect.stringMatching(/^Ow/) }, headers: { 'Content-Type': 'application/json' } })
    void call('/categories')
    void call('/categories', { body: { name: 'Owls', description: 'Night birds' } })
    const entry = await waiting
    expect(entry).toMatchObject({ operation: 'createCategory', request: { body: { name: 'Owls', description: 'Night birds' } }, response: { status: 201 } })
  })

  it('rejects after the timeout, saying what it waited for and what arrived meanwhile', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Before' } })
    const waiting = petstore.requests.waitFor({ operation: 'createCategory', body: { name: 'Owls' } }, { timeout: 200 })
    await call('/categories', { body: { name: '' } })
    await call('/pets/1')
    const error = await waiting.then(() => undefined, (reason: unknown) => reason)
    expect(error).toBeInstanceOf(WaitForTimeoutError)
    expect((error as Error).message).toBe(
      [
        'No request matched { operation: "createCategory", body: {"name": "Owls"} } within 200 ms. Arrived meanwhile (2):',
        '  1: POST /v1/categories (createCategory) → 400, body {"name": ""}',
        '  2: GET /v1/pets/1 (getPetById) → 200',
      ].join('\n'),
    )
    expect((error as WaitForTimeoutError).arrived.map((entry) => entry.id)).toEqual([2, 3])
  })

  it("points the timeout's stack at the line that called waitFor, not at the timer (a trial user could not tell which wait timed out)", async () => {
    const petstore = await harness.use()
    const error = await petstore.requests.waitFor({ operation: 'listOrders' }, { timeout: 10 }).then(() => undefined, (reason: unknown) => reason)
    expect(error).toBeInstanceOf(WaitForTimeoutError)
    const frames = (error as Error).stack!.split('\n')
    expect(frames[0]).toBe(`WaitForTimeoutError: ${(error as Error).message.split('\n')[0]}`)
    expect(frames.some((frame) => frame.includes('journal-wait.test.ts'))).toBe(true)
  })

  it('rejects with the message the library guide shows', async () => {
    const petstore = await harness.use()
    const waiting = petstore.requests.waitFor({ operation: 'getPetById' }, { timeout: 300 })
    await call('/categories', { body: { name: 'Owls', description: 'From the form' } })
    await call('/categories')
    const message = await waiting.then(() => '', (error: unknown) => (error as Error).message)
    expect(message).toMatch(/^No request matched/)
    expect(readFileSync(new URL('../docs/library.md', import.meta.url), 'utf8')).toContain(`\`\`\`text\n${message}\n\`\`\``)
  })

  it('rejects with the error of a matcher that throws, and the request is answered all the same', async () => {
    const petstore = await harness.use()
    const throwing = { asymmetricMatch: () => { throw new Error('my matcher broke') } }
    const waiting = petstore.requests.waitFor({ body: throwing })
    const answer = await call('/categories', { body: { name: 'Owls' } })
    expect(answer.status).toBe(201)
    await expect(waiting).rejects.toThrow('my matcher broke')
  })

  it('says when nothing arrived at all', async () => {
    const petstore = await harness.use()
    await expect(petstore.requests.waitFor({ status: 500 }, { timeout: 10 })).rejects.toThrow('No request matched { status: 500 } within 10 ms. Nothing arrived meanwhile.')
  })

  it.each([
    { name: 'a path no operation has', match: { path: '/categories' }, options: {}, message: /^Invalid requests.waitFor\(\) match path: expected the full URL path of an operation/ },
    { name: 'an unknown field', match: { bodyy: {} }, options: {}, message: 'Invalid requests.waitFor() match bodyy: expected a filter field: method, path, operation, status, body, headers, query' },
    { name: 'headers not an object', match: { headers: 'x' }, options: {}, message: 'Invalid requests.waitFor() match headers: expected an object of header names (lower case) to values' },
    { name: 'a negative timeout', match: {}, options: { timeout: -1 }, message: 'Invalid requests.waitFor() option timeout: expected a number of milliseconds (1000), received -1' },
  ])('rejects a match that can never hold with invalid_option: $name', async ({ match, options, message }) => {
    const petstore = await harness.use()
    const error = await petstore.requests.waitFor(match as never, options).then(() => undefined, (reason: unknown) => reason)
    expect(error).toBeInstanceOf(PetstoreError)
    expect(error).toMatchObject({ code: 'invalid_option', message })
  })

  it('leaves no listener behind once it settles', async () => {
    const journal = new RequestJournal()
    const { waitForEntry } = await import('../src/core/journal-wait.js')
    let listeners = 0
    const watched = {
      all: () => journal.all(),
      onRecord: (listener: () => void) => {
        listeners++
        const off = journal.onRecord(listener)
        return () => {
          listeners--
          off()
        }
      },
    }
    const found = waitForEntry(watched, { method: 'GET' }, 60_000)
    expect(listeners).toBe(1)
    journal.record({ time: '', durationMs: 0, operation: null, method: 'GET', url: 'https://x.test/v1/x', path: '/v1/x', request: { headers: {}, body: undefined }, response: { status: 404, body: undefined } })
    expect((await found).path).toBe('/v1/x')
    expect(listeners).toBe(0)
    await expect(waitForEntry(watched, { method: 'POST' }, 1)).rejects.toThrow(WaitForTimeoutError)
    expect(listeners).toBe(0)
  })
})
