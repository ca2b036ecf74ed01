import { expect, petstore, test } from './fixtures.js'

test('@msw/playwright serves the page the petstore', async ({ network, page }) => {
  void network
  await page.goto('/')
  await expect(page.locator('li')).toHaveText(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})

test('@msw/playwright: a scenario switched from the test shows in the page', async ({ network, page }) => {
  void network
  await petstore.useScenario('empty')
  await page.goto('/')
  await expect(page.getByText('No categories yet')).toBeVisible()
})

test('@msw/playwright: the next test is back on the default scenario', async ({ network, page }) => {
  void network
  await page.goto('/')
  await expect(page.locator('li')).toHaveCount(5)
})

test('the Service Worker serves baseUrl "/v1" on the page’s own origin', async ({ page }) => {
  await page.goto('/?worker')
  await expect(page.locator('li')).toHaveText(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})
