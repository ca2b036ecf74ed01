import { defineConfig } from '@playwright/test'

const port = Number(process.env['PORT'] ?? 41731)

export default defineConfig({
  testDir: 'tests',
  timeout: 30_000,
  // The static Storybook (`storybook build`), served as is.
  webServer: { command: `npx vite preview --outDir storybook-static --port ${port} --strictPort --host 127.0.0.1`, url: `http://127.0.0.1:${port}/`, reuseExistingServer: false },
  use: {
    baseURL: `http://127.0.0.1:${port}/`,
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    },
  },
})
