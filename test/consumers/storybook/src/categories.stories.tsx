import type { Meta, StoryObj } from '@storybook/react-vite'
import { createPetstore, type ScenarioInput } from 'petstore-sandbox'
import { Categories } from './categories.js'

export default { title: 'Shop/Categories', component: Categories } satisfies Meta<typeof Categories>
type Story = StoryObj<typeof Categories>

// One story per scenario, each rendering with a fresh petstore.
const scenario = (name: ScenarioInput): Story => ({
  beforeEach({ msw }) {
    msw.use(...createPetstore({ baseUrl: '/v1', apiKeys: ['t0ken'], scenario: name }).handlers)
  },
})

export const Default = scenario('default')
export const Empty = scenario('empty')
export const LargeCatalog = scenario('large-catalog')
export const AfterSunset = scenario('after-sunset')
