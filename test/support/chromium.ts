/**
 * Headless Chromium for the browser tests: Debian's `/usr/bin/chromium` driven by playwright-core,
 * never a downloaded browser. Without it the tests skip with a visible message, or fail under CI.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest'

export const CHROMIUM_PATH = '/usr/bin/chromium'

const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

const INSTALL = 'apt-get install -y chromium'

/**
 * `describe` when Chromium is installed. Otherwise `describe.skip` with a console message, or,
 * with `CI` set, a thrown error: CI must not pass by skipping.
 */
export function describeWithChromium(name: string, body: () => void): void {
  if (existsSync(CHROMIUM_PATH)) {
    describe(name, body)
    return
  }
  if (process.env['CI']) {
    throw new Error(`Chromium not found at ${CHROMIUM_PATH}: browser tests must run under CI; ${INSTALL}`)
  }
  console.warn(`Chromium not found at ${CHROMIUM_PATH}: skipping browser tests; ${INSTALL}`)
  describe.skip(name, body)
}

/**
 * Launches Chromium with a fresh user-data-dir before the suite and closes it (and deletes the
 * directory) after. Call inside {@link describeWithChromium}.
 */
export function useChromium(): { newPage(): Promise<Page> } {
  let context: BrowserContext | undefined
  let userDataDir: string | undefined
  let pageErrors: string[] = []
  beforeAll(async () => {
    userDataDir = await mkdtemp(join(tmpdir(), 'petstore-chromium-'))
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: FLAGS,
    })
  })
  // An uncaught error in a page fails the test that opened it, even when its assertions passed.
  afterEach(() => {
    const errors = pageErrors
    pageErrors = []
    expect(errors, 'uncaught errors in the page').toEqual([])
  })
  afterAll(async () => {
    await context?.close()
    if (userDataDir) await rm(userDataDir, { recursive: true, force: true })
  })
  return {
    async newPage() {
      if (!context) throw new Error('Chromium is not running: call useChromium() inside describeWithChromium')
      const page = await context.newPage()
      page.on('pageerror', (error) => pageErrors.push(error.message))
      return page
    },
  }
}
