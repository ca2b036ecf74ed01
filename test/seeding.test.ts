/**
 * `petstore.seed()` (one test's data in one line) and `petstore.useBaseline()` (what `reset()`
 * returns to for one file), seen through real requests.
 */
import { describe, expect, it } from 'vitest'
import { PetstoreError, type Category } from '../src/index.js'
import { call, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()

const names = (categories: readonly Category[]) => categories.map((category) => category.name)

describe('petstore.seed()', () => {
  it('replaces the categories for this test, numbering them from 1, and a create gets the next id', async () => {
    const petstore = await harness.use()
    await petstore.seed({ categories: [{ name: 'Ferrets' }, { name: 'Owls', description: 'Night birds' }] })
    expect((await call('/categories')).body).toEqual([
      { id: 1, name: 'Ferrets' },
      { id: 2, name: 'Owls', description: 'Night birds' },
    ])
    expect((await call<Category>('/categories', { body: { name: 'Newts' } })).body.id).toBe(3)
  })

  it('keeps given ids, numbers the others after the highest, and leaves pets and orders as the scenario has them', async () => {
    const petstore = await harness.use()
    await petstore.seed({ categories: [{ id: 40, name: 'Ferrets' }, { name: 'Owls' }] })
    expect(await petstore.categories.list()).toEqual([
      { id: 40, name: 'Ferrets' },
      { id: 41, name: 'Owls' },
    ])
    expect(await petstore.pets.list()).toHaveLength(4)
    expect(await petstore.orders.list()).toHaveLength(2)
  })

  it('replaces pets and orders when named, and a later seed keeps what an earlier one laid', async () => {
    const petstore = await harness.use()
    await petstore.seed({ categories: [{ name: 'Ferrets' }] })
    await petstore.seed({ pets: [{ id: 7, name: 'Slinky', status: 'available' }], orders: [] })
    expect((await call('/pets/7')).body).toMatchObject({ id: 7, name: 'Slinky' })
    expect((await call('/pets/1')).status).toBe(404)
    expect(await petstore.orders.list()).toEqual([])
    expect(names(await petstore.categories.list())).toEqual(['Ferrets'])
  })

  it('keeps the scenario, its keys and the journal', async () => {
    const petstore = await harness.use({ scenario: 'empty' })
    await call('/categories')
    await petstore.seed({ categories: [{ name: 'Ferrets' }] })
    expect(petstore.scenario.name).toBe('empty')
    expect((await call('/categories', { auth: null })).status).toBe(401)
    expect(petstore.requests.all()).toHaveLength(2)
  })

  it('is undone by reset(), and by reset({ keepScenario: true }) back to the scenario in use', async () => {
    const petstore = await harness.use()
    await petstore.seed({ categories: [{ name: 'Ferrets' }], pets: [] })
    await petstore.reset()
    expect(names(await petstore.categories.list())).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
    expect(await petstore.pets.list()).toHaveLength(4)

    await petstore.useScenario('empty')
    await petstore.seed({ categories: [{ name: 'Ferrets' }] })
    await petstore.reset({ keepScenario: true })
    expect(petstore.scenario.name).toBe('empty')
    expect(await petstore.categories.list()).toEqual([])
  })

  it.each([
    { name: 'a category without a name', data: { categories: [{ description: 'x' }] }, message: 'Invalid seed: categories[0].name: name must be a non-empty string' },
    { name: 'duplicate ids', data: { categories: [{ id: 1, name: 'a' }, { id: 1, name: 'b' }] }, message: 'Invalid seed: categories[1].id: duplicate id 1' },
    { name: 'a pet without an id', data: { pets: [{ name: 'Rex' }] }, message: 'Invalid seed: pets[0].id: id must be a safe integer' },
    { name: 'an unknown collection', data: { categorys: [] }, message: 'Invalid seed: (root): Unrecognized key: "categorys"' },
    { name: 'a list where an object belongs', data: [{ name: 'Ferrets' }], message: 'Invalid seed: expected an object such as { categories: [{ name: "Ferrets" }] }, received [{"name":"Ferrets"}]' },
    { name: 'a generator whose names would not differ', data: { categories: { generate: { count: 2, name: 'Same' } } }, message: 'Invalid seed: categories.generate.name: must contain {n} so that names differ' },
  ])('refuses $name with invalid_scenario naming the field, and changes nothing', async ({ data, message }) => {
    const petstore = await harness.use()
    const refused = await petstore.seed(data as never).then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(refused).toBeInstanceOf(PetstoreError)
    expect(refused).toMatchObject({ code: 'invalid_scenario' })
    expect((refused as Error).message).toContain(message)
    expect(await petstore.categories.list()).toHaveLength(5)
  })

  it('is waited for by a request and a read sent without awaiting it, as useScenario() and useBaseline() are', async () => {
    const petstore = await harness.use()
    const seeded = petstore.seed({ categories: [{ name: 'Ferrets' }] })
    expect((await call('/categories')).body).toEqual([{ id: 1, name: 'Ferrets' }])
    await seeded
    const switched = petstore.useBaseline('empty')
    expect(await petstore.categories.list()).toEqual([])
    await switched
  })

  it('generates categories as a scenario does', async () => {
    const petstore = await harness.use()
    await petstore.seed({ categories: { generate: { count: 3, name: 'Category {n}' } } })
    expect(names(await petstore.categories.list())).toEqual(['Category 1', 'Category 2', 'Category 3'])
  })
})

describe('petstore.useBaseline()', () => {
  // The sequence of issue 21 point 5: a shared setup resets after each test, a file picks its scenario once.
  it('a useScenario() in beforeAll holds for the first test only: reset() goes back to the creation scenario', async () => {
    const petstore = await harness.use()
    await petstore.useScenario('empty') // beforeAll
    expect(await petstore.categories.list()).toEqual([]) // first test
    await petstore.reset() // the shared afterEach
    expect(await petstore.categories.list()).toHaveLength(5) // second test: default again
  })

  it('makes reset() return to the baseline for every test of the file, then the way back restores the previous one', async () => {
    const petstore = await harness.use()
    const restore = await petstore.useBaseline('empty') // beforeAll
    for (const name of ['Ferrets', 'Owls']) {
      // each test starts empty, writes, and the shared afterEach resets
      expect((await call('/categories')).body).toEqual([])
      expect((await call<Category>('/categories', { body: { name } })).body.id).toBe(1)
      await petstore.reset()
      expect(petstore.scenario.name).toBe('empty')
    }
    await restore() // after the file (Vitest calls what beforeAll returned)
    expect(petstore.scenario.name).toBe('default')
    expect(await petstore.categories.list()).toHaveLength(5)
    expect(petstore.requests.all()).toEqual([])
    await petstore.reset()
    expect(petstore.scenario.name).toBe('default')
  })

  it('a useScenario() in a test still returns to the baseline, and reset() undoes a seed on it', async () => {
    const petstore = await harness.use()
    await petstore.useBaseline('empty')
    await petstore.useScenario('flaky')
    await petstore.reset()
    expect(petstore.scenario.name).toBe('empty')
    await petstore.seed({ categories: [{ name: 'Ferrets' }] })
    await petstore.reset()
    expect(await petstore.categories.list()).toEqual([])
  })

  it('rejects an unknown scenario and keeps the baseline', async () => {
    const petstore = await harness.use()
    await expect(petstore.useBaseline('nope')).rejects.toMatchObject({ code: 'unknown_scenario' })
    await petstore.useScenario('empty')
    await petstore.reset()
    expect(petstore.scenario.name).toBe('default')
  })
})
