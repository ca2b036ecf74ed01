import { expect, it } from 'vitest'
import type { Page } from 'playwright-core'
import { describeWithChromium, useChromium } from '../support/chromium.js'
import { useStaticServer } from '../support/static-server.js'
import { useWorkerApp } from '../support/worker-app.js'
import type { AppResponse } from './fixtures/app.js'

describeWithChromium('setupPetstoreWorker in Chromium', () => {
  const app = useWorkerApp()
  const site = useStaticServer(() => app.dir())
  const chromium = useChromium()

  async function openApp(page?: Page): Promise<Page> {
    const opened = page ?? (await chromium.newPage())
    await opened.goto(`${site.url()}/`)
    await opened.waitForSelector('body[data-ready="true"]')
    return opened
  }

  const listed = (page: Page) => page.locator('#categories li').allTextContents()

  const call = (page: Page, method: 'GET' | 'POST', path: string, options: { key?: string; body?: string }) =>
    page.evaluate(({ method, path, options }): Promise<AppResponse> => window.petstoreApp.request(method, path, options), {
      method,
      path,
      options,
    })

  it('lists, creates (201), answers 400 and 401, and lists the new category', async () => {
    const page = await openApp()
    expect(await listed(page)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish'])

    const created = await call(page, 'POST', '/v1/categories', { key: 't0ken', body: JSON.stringify({ name: 'Ferrets', description: 'Curious' }) })
    expect(created).toEqual({ status: 201, body: { id: 6, name: 'Ferrets', description: 'Curious' } })

    const invalid = await call(page, 'POST', '/v1/categories', { key: 't0ken', body: JSON.stringify({ description: 'no name' }) })
    expect(invalid.status).toBe(400)
    expect(invalid.body).toMatchObject({ status: 400, code: expect.any(String), message: expect.stringContaining('name') })

    const unauthorized = await call(page, 'GET', '/v1/categories', { key: 'wrong' })
    expect(unauthorized.status).toBe(401)
    expect(unauthorized.body).toMatchObject({ status: 401, code: expect.any(String), message: expect.any(String) })

    await page.evaluate(() => window.petstoreApp.render())
    expect(await listed(page)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish', '6 Ferrets'])
    expect(await page.evaluate(() => window.petstoreApp.journal())).toEqual([
      { method: 'GET', path: '/v1/categories', status: 200 },
      { method: 'POST', path: '/v1/categories', status: 201 },
      { method: 'POST', path: '/v1/categories', status: 400 },
      { method: 'GET', path: '/v1/categories', status: 401 },
      { method: 'GET', path: '/v1/categories', status: 200 },
    ])
    await page.close()
  })

  it('answers what a test planned through the worker: the next list 503, then the list', async () => {
    const page = await openApp()
    await page.evaluate(() => window.petstoreApp.plan({ operation: 'listCategories', status: 503 }))
    const planned = await call(page, 'GET', '/v1/categories', { key: 't0ken' })
    expect(planned).toEqual({ status: 503, body: { code: 'service_unavailable', status: 503, message: 'Service unavailable: simulated (planned answer)' } })
    expect((await call(page, 'GET', '/v1/categories', { key: 't0ken' })).status).toBe(200)
    await page.close()
  })

  it('keeps created categories across a reload with persist: true, until reset', async () => {
    const page = await openApp()
    await call(page, 'POST', '/v1/categories', { key: 't0ken', body: JSON.stringify({ name: 'Owls' }) })

    await openApp(page)
    expect(await listed(page)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish', '6 Owls'])
    expect(await page.evaluate(() => window.petstoreApp.journal())).toEqual([{ method: 'GET', path: '/v1/categories', status: 200 }])

    await page.evaluate(() => window.petstoreApp.reset())
    await openApp(page)
    expect(await listed(page)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish'])
    await page.close()
  })

  it("seeds one test's categories through the worker's petstore, and reset() undoes it", async () => {
    const page = await openApp()
    await page.evaluate(() => window.petstoreApp.seed(['Ferrets', 'Owls']))
    await page.evaluate(() => window.petstoreApp.render())
    expect(await listed(page)).toEqual(['1 Ferrets', '2 Owls'])
    await page.evaluate(() => window.petstoreApp.reset())
    await page.evaluate(() => window.petstoreApp.render())
    expect(await listed(page)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish'])
    await page.close()
  })

  it('starts a new tab from the seed: persistence is per tab', async () => {
    const page = await openApp()
    await call(page, 'POST', '/v1/categories', { key: 't0ken', body: JSON.stringify({ name: 'Geckos' }) })
    const other = await openApp()
    expect(await listed(other)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish'])
    await Promise.all([page.close(), other.close()])
  })
})
