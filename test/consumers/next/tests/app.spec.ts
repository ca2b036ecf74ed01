import { expect, test } from '@playwright/test'

const app = () => process.env['APP_URL']!
const sandbox = (path: string) => new URL(path, process.env['PETSTORE_API_URL']!).href
const key = { authorization: 'Bearer t0ken' }
const server = 'Rendered on the server'
const browser = 'Fetched in the browser'

test.afterEach(async ({ request }) => {
  // The standalone sandbox keeps its data between requests: back to its scenario's seed.
  await request.put(sandbox('/__sandbox/scenario'), { headers: key, data: { name: 'default' } })
})

test('the server renders what the standalone sandbox answers, with no JavaScript', async ({ request }) => {
  const html = await (await request.get(app())).text()
  expect(html).toContain('<li>Dogs</li>')
  expect(html).toContain('<li>Fish</li>')
})

test('a scenario switched in the sandbox shows in the server-rendered page', async ({ page, request }) => {
  const switched = await request.put(sandbox('/__sandbox/scenario'), { headers: key, data: { name: 'empty' } })
  expect(switched.status()).toBe(200)
  await page.goto(app())
  await expect(page.getByRole('region', { name: server })).toHaveText('No categories yet')
})

test('the browser’s own fetch is answered by the worker, started once', async ({ page }) => {
  const errors: string[] = []
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text())
  })
  page.on('pageerror', (error) => errors.push(error.message))
  // What failed, by address: a console line says only "Failed to load resource".
  page.on('response', (response) => {
    if (response.status() >= 400) errors.push(`${response.status()} ${response.url()}`)
  })
  page.on('requestfailed', (request) => errors.push(`failed ${request.url()}: ${request.failure()?.errorText}`))
  await page.goto(app())
  await expect(page.getByRole('region', { name: browser }).getByRole('listitem')).toHaveText(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
  expect(errors).toEqual([])
})

test('the worker and the sandbox hold apart data: a category created in the sandbox is server-side only', async ({ page, request }) => {
  const created = await request.post(sandbox('/v1/categories'), { headers: key, data: { name: 'Ferrets' } })
  expect(created.status()).toBe(201)
  await page.goto(app())
  await expect(page.getByRole('region', { name: server }).getByRole('listitem')).toHaveCount(6)
  await expect(page.getByRole('region', { name: browser }).getByRole('listitem')).toHaveCount(5)
})
