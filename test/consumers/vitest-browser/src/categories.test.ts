import { showCategories } from './categories.js'
import { expect, test } from './test-extend.js'

test('lists the categories in the page', async ({ petstore }) => {
  await showCategories(document.body)
  expect([...document.querySelectorAll('li')].map((item) => item.textContent)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
  expect(petstore.requests.all({ method: 'GET' })).toHaveLength(1)
})

test('shows an empty shop on the empty scenario', async ({ petstore }) => {
  await petstore.useScenario('empty')
  await showCategories(document.body)
  expect(document.body.textContent).toContain('No categories yet')
})

test('is back on the default scenario in the next test', async ({ petstore }) => {
  await showCategories(document.body)
  expect(document.querySelectorAll('li')).toHaveLength(5)
  expect(petstore.requests.all()).toHaveLength(1)
})

test('shows the contract’s 401 when the key is unknown', async () => {
  const response = await fetch('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer wrong' } })
  expect(response.status).toBe(401)
  expect(await response.json()).toMatchObject({ code: expect.any(String), message: expect.any(String) })
})
