// ESLint with type information, for the bugs tsc lets through: a promise nobody awaits or catches, an async
// function where a callback's return is ignored, a switch that misses a member of its union. Layout is Prettier's.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    // generated/ is output; scripts/client-package/ is type-checked as generated/client/, where `generate` copies it.
    ignores: ['generated/', 'dist/', '.ci/', 'scripts/client-package/'],
  },
  {
    files: ['**/*.{ts,tsx,js,mjs}'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        // tsconfig.json covers src/, test/, scripts/, migrations/; console/tsconfig.json covers console/src/.
        projectService: { allowDefaultProject: ['*.js', 'scripts/*.mjs', 'test/support/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // A knex grouped where returns nothing: `(w) => void w.where(...)`, since the builder it would return is thenable.
      '@typescript-eslint/no-misused-promises': 'error',
      // A switch over a union names every member, so a member added later is a lint error rather than a silent
      // `default`; `default` stays for open types (a string, a number).
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: false, requireDefaultForNonUnion: false, allowDefaultCaseForExhaustiveSwitch: true },
      ],
      // A leading underscore marks a binding kept for its position (a middleware's `_next`, a rest sibling).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Names are the compiler's to check (typescript-eslint's advice); the .mjs scripts run on Node's globals.
      'no-undef': 'off',
      // A `let` read by a closure before its one assignment (a logger its own limiter logs through) stays a `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // knex rows, supertest bodies and JSON.parse are `any` by library design; typing each read would be noise here,
      // and the wire is typed where it counts (the generated Data/Responses types).
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      // Test doubles and knex callbacks use `any` on purpose; strict tsc checks everything else.
      '@typescript-eslint/no-explicit-any': 'off',
      // Services and repositories are factories returning objects whose methods never read `this`.
      '@typescript-eslint/unbound-method': 'off',
      // An async function without `await` is how a handler or hook that must return a promise turns a throw into a
      // rejection (openapi-backend handlers, vitest hooks, fake upstreams).
      '@typescript-eslint/require-await': 'off',
    },
  },
);
