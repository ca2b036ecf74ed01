import { mkdir } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import type { Page } from 'playwright-core'
import { expect, it, onTestFinished } from 'vitest'
import { describeWithChromium, useChromium } from '../support/chromium.js'
import { DEMO_DIR, useDemoSandbox } from '../support/demo-sandbox.js'
import { startSandbox } from '../support/sandbox-server.js'

const KEY = 'demo-key-1'
const RESULTS = fileURLToPath(new URL('../../test-results/', import.meta.url))

describeWithChromium('the demo page at /__sandbox/', () => {
  const sandbox = useDemoSandbox(KEY)
  const chromium = useChromium()

  async function connect(key: string): Promise<Page> {
    const page = await chromium.newPage()
    await page.goto(`${sandbox.url()}/__sandbox/`)
    await page.getByLabel('API key', { exact: true }).fill(key)
    await page.getByRole('button', { name: 'Connect' }).click()
    return page
  }

  const rows = (page: Page, table: string) => page.locator(`#${table} tbody tr`)
  const categoryNames = (page: Page) => page.locator('#categories tbody tr td:nth-child(2)').allTextContents()

  it('picks a scenario, shows a 400 inline, creates, follows the journal and resets', async () => {
    const page = await connect(KEY)
    await page.getByRole('cell', { name: 'Dogs', exact: true }).waitFor()
    expect(await categoryNames(page)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
    await page.locator('#health', { hasText: /^Sandbox \S+ up for \d+ s$/ }).waitFor()
    expect(await page.evaluate(() => sessionStorage.getItem('petstore-sandbox/demo-key'))).toBe(KEY)
    expect(page.url()).not.toContain(KEY)

    await page.getByRole('combobox', { name: 'Scenario' }).selectOption('empty')
    await page.getByRole('button', { name: 'Use scenario' }).click()
    await page.getByRole('status').filter({ hasText: 'Scenario empty' }).waitFor()
    await page.locator('#category-count', { hasText: '(0)' }).waitFor()
    expect(await rows(page, 'categories').count()).toBe(0)

    // An empty name goes to the sandbox, whose 400 message appears next to the field.
    await page.getByRole('button', { name: 'Create' }).click()
    const nameError = page.locator('#name-error')
    await nameError.filter({ hasText: /./ }).waitFor()
    expect(await nameError.textContent()).toBe('name must be a non-empty string')
    const name = page.getByLabel('Name', { exact: true })
    expect(await name.getAttribute('aria-invalid')).toBe('true')
    expect(await name.getAttribute('aria-describedby')).toContain('name-error')
    expect(await nameError.getAttribute('role')).toBe('alert')

    await name.fill('Ferrets')
    await page.getByLabel('Description (optional)').fill('Curious <b>and</b> quick')
    await page.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('cell', { name: 'Ferrets', exact: true }).waitFor()
    expect(await nameError.isVisible()).toBe(false)
    expect(await page.locator('#categories tbody tr').first().locator('td').allTextContents()).toEqual([
      '1',
      'Ferrets',
      'Curious <b>and</b> quick',
    ])
    expect(await page.locator('#categories b').count()).toBe(0)
    // The tenant summary counts records rather than dumping them.
    await page.locator('#tenant dt:text-is("Categories") + dd', { hasText: /^1$/ }).waitFor()
    expect(await page.locator('#tenant dt:text-is("Scenario") + dd').textContent()).toBe('empty 1.0.0')

    const journal = rows(page, 'journal')
    await journal.filter({ hasText: 'POST /v1/categories' }).filter({ hasText: '201' }).waitFor()
    const requests = await journal.locator('td:nth-child(2)').allTextContents()
    const statuses = await journal.locator('td:nth-child(3)').allTextContents()
    const posts = requests.flatMap((request, index) => (request === 'POST /v1/categories' ? [statuses[index]] : []))
    expect(posts).toEqual(['201', '400'])

    await mkdir(RESULTS, { recursive: true })
    await page.screenshot({ path: `${RESULTS}demo.png`, fullPage: true })

    await page.getByRole('button', { name: 'Reset tenant' }).click()
    await page.getByRole('status').filter({ hasText: 'Reset to scenario empty: 0 categories.' }).waitFor()
    await page.locator('#category-count', { hasText: '(0)' }).waitFor()
    await page.close()
  })

  it('shows the 401 message next to the key field for a key the sandbox does not accept', async () => {
    const page = await connect('not-a-key')
    const keyError = page.locator('#key-error')
    await keyError.filter({ hasText: /./ }).waitFor()
    expect(await keyError.textContent()).toMatch(/^Invalid API key/)
    expect(await page.locator('#workspace').isHidden()).toBe(true)
    await page.close()
  })
})

describeWithChromium('the demo page in proxy mode (serve --proxy)', () => {
  const chromium = useChromium()

  it('shows the contract violations of the real service’s answers, and marks them in the journal', async () => {
    // The real service: a node:http server whose list gives a category without its id.
    const real = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('[{"name":"Dogs"}]'))
    await new Promise<void>((resolve) => real.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => real.close(() => resolve())))
    const { origin } = await startSandbox({ proxy: `http://127.0.0.1:${(real.address() as AddressInfo).port}/v1`, demoDir: DEMO_DIR })
    const page = await chromium.newPage()
    onTestFinished(() => page.close())
    await page.goto(`${origin}/__sandbox/`)
    await page.getByLabel('API key', { exact: true }).fill('partner-key')
    await page.getByRole('button', { name: 'Connect' }).click()
    const panel = page.getByRole('region', { name: /Contract violations/ })
    await panel.locator('tbody tr').first().waitFor()
    expect(await panel.locator('#violations-upstream').textContent()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/)
    expect(await panel.locator('tbody tr').first().locator('td').allTextContents()).toEqual([
      expect.stringMatching(/^\d+×$/),
      'listCategories',
      expect.stringMatching(/^response: 200 body \[0\]: id: /),
      expect.any(String),
    ])
    const flagged = page.locator('#journal tbody tr td:nth-child(3)', { hasText: '⚠' }).first()
    expect(await flagged.textContent()).toBe('200 ⚠ 1')
  })

  it('hides the violations panel when the sandbox answers from its own data', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY], demoDir: DEMO_DIR })
    const page = await chromium.newPage()
    onTestFinished(() => page.close())
    await page.goto(`${origin}/__sandbox/`)
    await page.getByLabel('API key', { exact: true }).fill(KEY)
    await page.getByRole('button', { name: 'Connect' }).click()
    await page.locator('#journal tbody tr').first().waitFor()
    expect(await page.locator('#violations-panel').isHidden()).toBe(true)
  })
})
