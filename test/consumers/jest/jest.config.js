// Set up as msw's documentation sets up Jest for msw, and for nothing else: nothing here names
// petstore-sandbox or its dependencies (scripts/check-package.sh checks that). JEST_TRANSFORM
// picks how TypeScript is compiled.
const transforms = {
  'ts-jest-node10': ['ts-jest', { tsconfig: 'tsconfig.node10.json' }],
  'ts-jest-node16': ['ts-jest', { tsconfig: 'tsconfig.node16.json' }],
  swc: ['@swc/jest', {}],
}

// msw's own: since msw 2.13 some of msw's dependencies are ESM-only, which Jest cannot require
// (mswjs/msw#2698), so those few are compiled like the tests.
const mswEsmOnly = ['rettime', 'until-async', '@open-draft/[\\w-]+']

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'jest-fixed-jsdom',
  testEnvironmentOptions: {
    customExportConditions: [''],
  },
  transform: {
    '^.+\\.tsx?$': transforms[process.env.JEST_TRANSFORM ?? 'ts-jest-node10'],
    '^.+\\.m?js$': '@swc/jest',
  },
  transformIgnorePatterns: [`^(?!.*/node_modules/(?:${mswEsmOnly.join('|')})/(?!.*/node_modules/)).*/node_modules/`],
}
