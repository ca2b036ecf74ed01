import { expect, it } from 'vitest'
import { categoryNames } from './petstore.js'

it('shows the default categories in the next file, which set no baseline', async () => {
  expect(await categoryNames()).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})
