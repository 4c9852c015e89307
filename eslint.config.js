import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Layering (docs/architecture.md): the domain is pure, use cases see ports, adapters talk to AWS,
// handlers are thin and independent, and configuration is read in one module.
const sdk = {
  group: ['@aws-sdk/*', '@smithy/*'],
  message: 'The AWS SDK belongs in shared/adapters (or local/, infra/, bench/, test/): call it through a port.',
};
const adapters = {
  regex: '^(\\.\\./)+adapters/',
  message: 'Use cases receive ports; they do not import adapters.',
};
const functionsLayer = {
  regex: '(^|/)functions/',
  message: 'shared/ does not depend on the Lambda handlers.',
};
const domainOutward = {
  regex: '^\\.\\./(app|adapters)/',
  message: 'The domain is pure: it does not import use cases or adapters.',
};
const sideEffects = {
  group: ['fs', 'fs/*', 'child_process', 'net', 'http', 'https', 'dgram', 'worker_threads', 'cluster'].flatMap(
    (name) => [name, `node:${name}`],
  ),
  message: 'The domain is pure: no I/O or processes.',
};
// A handler module runs its start-up (clients, use cases) when imported, so handlers share code
// only through these modules, which are not handlers.
const handlerModules = {
  regex: '^\\.\\.?/(?!(\\.\\./)*shared/)(?!(http|dependencies|observability|workflow/task-input|task-input)\\.js$)',
  message: 'A handler does not import another handler; move what they share to a module that is not a handler.',
};
const restrict = (...patterns) => ['error', { patterns }];

export default tseslint.config(
  { ignores: ['node_modules/', 'cdk.out/', '.capstan/', 'coverage/', 'console/dist/'] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  { files: ['**/*.mjs', '**/*.js'], languageOptions: { globals: { process: 'readonly', console: 'readonly' } } },
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  // Tests assert what they found; a non-null assertion there fails loudly, which is the point.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-non-null-assertion': 'off' } },

  // The layers. Each block states every restriction of its layer (a later block replaces the rule's options).
  {
    files: ['shared/**/*.ts', 'functions/**/*.ts', 'worker-container/**/*.ts'],
    ignores: ['shared/adapters/**'],
    rules: { 'no-restricted-imports': restrict(sdk, functionsLayer) },
  },
  {
    files: ['shared/domain/**/*.ts'],
    rules: { 'no-restricted-imports': restrict(sdk, functionsLayer, domainOutward, sideEffects) },
  },
  { files: ['shared/app/**/*.ts'], rules: { 'no-restricted-imports': restrict(sdk, functionsLayer, adapters) } },
  {
    files: ['functions/**/*.ts'],
    rules: { 'no-restricted-imports': restrict(sdk, handlerModules) },
  },
  {
    files: ['shared/**/*.ts', 'functions/**/*.ts', 'worker-container/**/*.ts'],
    ignores: ['shared/config.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read settings through shared/config.ts, parsed once.' },
      ],
    },
  },

  // Existing exceptions, each to be removed by the change that fixes it.
);
