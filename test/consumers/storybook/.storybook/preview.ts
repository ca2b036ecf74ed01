import type { Preview } from '@storybook/react-vite'
import { initialize, mswLoader } from 'msw-storybook-addon'

initialize({ onUnhandledRequest: 'bypass', quiet: true })

export default { loaders: [mswLoader] } satisfies Preview
