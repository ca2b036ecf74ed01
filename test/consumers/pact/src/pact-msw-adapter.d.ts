// @pactflow/pact-msw-adapter 4.0.2 ships no type declarations (its package.json names
// dist/src/pactMswAdapter.d.ts, which the tarball lacks): the part this project uses.
declare module '@pactflow/pact-msw-adapter' {
  import type { SetupServer } from 'msw/node'

  export interface PactMswAdapterOptions {
    consumer: string
    providers: Record<string, string[]>
    pactOutDir?: string
    timeout?: number
    includeUrl?: string[]
    excludeUrl?: string[]
    excludeHeaders?: string[]
    debug?: boolean
    logger?: Pick<Console, 'log' | 'debug' | 'info' | 'warn' | 'error' | 'group' | 'groupCollapsed' | 'groupEnd'>
  }

  export interface PactMswAdapter {
    newTest(): void
    verifyTest(): void
    writeToFile(writer?: (path: string, data: object) => void): Promise<void>
    clear(): void
  }

  export function setupPactMswAdapter(setup: { server: SetupServer; options: PactMswAdapterOptions }): PactMswAdapter
}
