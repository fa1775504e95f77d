// Lint: typescript-eslint recommended, plus the layer rules of STYLE.md enforced with no-restricted-imports.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const layer = (files, patterns, message) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [{ group: patterns, message }] }] },
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
  layer(['src/handlers/**'], ['knex', 'redis', 'pg', '**/db/repositories/*', '**/db/knex.js'], 'Handlers translate; they reach data through services (STYLE.md habit 2).'),
  layer(['src/services/**'], ['express', 'redis', 'openapi-backend', '**/http/pipeline.js'], 'Services decide; they know nothing of HTTP (STYLE.md habit 2).'),
  layer(['src/lib/**'], ['knex', 'redis', 'pg', 'express'], 'lib/ is pure helpers without I/O.'),
  // The dependency-cruiser config (.dependency-cruiser.cjs) is CommonJS.
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
  {
    files: ['test/**'],
    rules: { '@typescript-eslint/no-unused-expressions': 'off' },
  },
);
