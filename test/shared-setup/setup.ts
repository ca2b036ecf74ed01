// The shared setup file: every test starts from the petstore's baseline.
import { afterEach } from 'vitest'
import { petstore } from './petstore.js'

afterEach(() => petstore.reset())
