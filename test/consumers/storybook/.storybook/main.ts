import type { StorybookConfig } from '@storybook/react-vite'

export default {
  stories: ['../src/**/*.stories.tsx'],
  addons: ['msw-storybook-addon'],
  framework: '@storybook/react-vite',
  staticDirs: ['../public'], // mockServiceWorker.js, from `npx msw init public`
  core: { disableTelemetry: true },
} satisfies StorybookConfig
