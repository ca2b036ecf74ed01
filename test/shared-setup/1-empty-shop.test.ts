import { beforeAll, expect, it } from 'vitest'
import { categoryNames, petstore } from './petstore.js'

// For this file, reset() returns to `empty`; Vitest calls the way back after the file.
beforeAll(() => petstore.useBaseline('empty'))

it('shows no categories in the first test', async () => {
  expect(await categoryNames()).toEqual([])
  await petstore.categories.create({ name: 'Ferrets' })
})

it('shows no categories in the second test either', async () => {
  expect(await categoryNames()).toEqual([])
})
