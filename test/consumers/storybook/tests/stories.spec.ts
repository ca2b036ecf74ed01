import { expect, test } from '@playwright/test'

const story = (id: string) => `/iframe.html?id=shop-categories--${id}&viewMode=story`

test('the default story lists the default scenario', async ({ page }) => {
  await page.goto(story('default'))
  await expect(page.locator('#storybook-root li')).toHaveText(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})

test('the empty story shows an empty shop', async ({ page }) => {
  await page.goto(story('empty'))
  await expect(page.getByText('No categories yet')).toBeVisible()
})

test('the large-catalog story lists 10,000 categories', async ({ page }) => {
  await page.goto(story('large-catalog'))
  await expect(page.locator('#storybook-root li')).toHaveCount(10_000)
})

test('the after-sunset story lists its categories', async ({ page }) => {
  await page.goto(story('after-sunset'))
  await expect(page.locator('#storybook-root li').first()).toBeVisible()
})
