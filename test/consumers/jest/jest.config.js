// Set up as msw's documentation sets up Jest for msw, and for nothing else: nothing here names
// petstore-sandbox or its dependencies (scripts/check-package.sh checks that).

/** @type {import('jest').Config} */
const config = {
  testEnvironment: 'jest-fixed-jsdom',
  testEnvironmentOptions: {
    customExportConditions: [''],
  },
  transform: {
    '^.+\\.tsx?$': 'ts-jest',
    // msw 2.13+: some of msw's own dependencies ship ESM only (mswjs/msw#2698), so those few
    // are compiled like the tests (below).
    '^.+\\.m?js$': '@swc/jest',
  },
  transformIgnorePatterns: ['^(?!.*/node_modules/(?:rettime|until-async|@open-draft/[\\w-]+)/(?!.*/node_modules/)).*/node_modules/'],
}

// CI runs this recipe with each way of compiling TypeScript: JEST_TRANSFORM picks one.
const transforms = {
  'ts-jest-node10': ['ts-jest', { tsconfig: 'tsconfig.node10.json' }],
  'ts-jest-node16': ['ts-jest', { tsconfig: 'tsconfig.node16.json' }],
  swc: ['@swc/jest', {}],
}
config.transform['^.+\\.tsx?$'] = transforms[process.env.JEST_TRANSFORM ?? 'ts-jest-node10']

module.exports = config
