import { defineConfig } from '@playwright/test'

const port = Number(process.env['PORT'] ?? 41730)
// VITE_DEV=1: the development server (`vite`, docs/browser.md's `import.meta.env.DEV` path, with its
// dependency pre-bundling); otherwise the production build (`vite build`), served as is.
const server = process.env['VITE_DEV'] === '1' ? 'npx vite' : 'npx vite preview'

export default defineConfig({
  testDir: 'tests',
  timeout: 30_000,
  webServer: { command: `${server} --port ${port} --strictPort --host 127.0.0.1`, url: `http://127.0.0.1:${port}/`, reuseExistingServer: false },
  use: {
    baseURL: `http://127.0.0.1:${port}/`,
    // Debian's Chromium, never a downloaded browser.
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    },
  },
})
