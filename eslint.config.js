// A small rule set, every rule on: type-aware checks that catch real bugs, nothing about layout.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'test-results/', 'test/package-consumer/', 'test/consumers/', 'src/scenario/builtin-scenarios.ts', '.tmp/'] },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended],
    plugins: { '@typescript-eslint': tseslint.plugin },
    languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      'no-undef': 'off', // TypeScript checks names
      'no-unused-vars': 'off',
      'no-redeclare': 'off', // a zod schema and its type share a name on purpose; tsc reports real clashes
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/unbound-method': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      eqeqeq: ['error', 'always'],
    },
  },
  {
    files: ['demo/**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: { sourceType: 'module', globals: { window: 'readonly', document: 'readonly', sessionStorage: 'readonly', fetch: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URLSearchParams: 'readonly', HTMLElement: 'readonly', Intl: 'readonly' } },
  },
)
