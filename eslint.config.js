// Lint: typescript-eslint recommended, plus the layer rules of STYLE.md enforced with no-restricted-imports, and
// libraries through their public APIs only (issue 25): no private paths, no function assigned over a library's method.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import noModuleState from './eslint/no-module-state.js';
import noLibraryMethodAssignment from './eslint/no-library-method-assignment.js';

/** Files inside a package that its public entry points do not export: importing them ties us to its internals. */
const PRIVATE_PATHS = {
  group: ['knex/lib/*', 'knex/lib/**', 'express/lib/*', 'express/lib/**', 'openapi-backend/*', 'openapi-backend/**'],
  message: 'A private path of a library: use its public entry point and documented API (issue 25).',
};
// The same paths loaded with require(), createRequire(...)(...) or import().
const PRIVATE_PATH_LITERAL = 'Literal[value=/^(knex\\/lib|express\\/lib|openapi-backend)\\//]';

const layer = (files, patterns, message) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [PRIVATE_PATHS, { group: patterns, message }] }] },
});

export default tseslint.config(
  { ignores: ['node_modules/', 'generated/', '.data/', 'test-artifacts/', 'dist/', 'console/dist/', 'sdk/dist/', 'sdk/src/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
      // Boundaries with untyped libraries (oidc-provider, openapi-backend) need `any` now and then; keep them visible.
      '@typescript-eslint/no-explicit-any': 'warn',
      // URL-safety code must match control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  {
    files: ['src/**', 'scripts/**'],
    plugins: { house: { rules: { 'no-library-method-assignment': noLibraryMethodAssignment } } },
    rules: {
      'no-restricted-imports': ['error', { patterns: [PRIVATE_PATHS] }],
      'no-restricted-syntax': ['error', { selector: `CallExpression > ${PRIVATE_PATH_LITERAL}.arguments, ImportExpression > ${PRIVATE_PATH_LITERAL}.source`, message: PRIVATE_PATHS.message }],
      'house/no-library-method-assignment': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    // config.ts holds the process's settings; server.ts and the worker's entry are scripts (their main() runs on import).
    ignores: ['src/config.ts', 'src/server.ts'],
    plugins: { state: { rules: { 'no-module-state': noModuleState } } },
    rules: { 'state/no-module-state': 'error' },
  },
  layer(['src/handlers/**'], ['knex', 'redis', '@redis/*', 'pg', '**/db/repositories/*', '**/db/knex.js'], 'Handlers translate; they reach data through services (STYLE.md habit 2).'),
  layer(['src/services/**'], ['express', 'redis', '@redis/*', 'openapi-backend', '**/http/pipeline.js'], 'Services decide; they know nothing of HTTP (STYLE.md habit 2).'),
  layer(['src/lib/**'], ['knex', 'redis', '@redis/*', 'pg', 'express'], 'lib/ is pure helpers without I/O.'),
  // The dependency-cruiser config (.dependency-cruiser.cjs) is CommonJS.
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
  {
    files: ['test/**'],
    rules: { '@typescript-eslint/no-unused-expressions': 'off' },
  },
);
