/**
 * Runs in every test file: a response that drifted from the contract fails the
 * test that received it, even when a client swallowed the thrown violation.
 */
import { afterEach, expect } from 'vitest';
import { violations } from './contract.js';

afterEach(() => {
  const seen = violations.splice(0);
  expect(seen, 'responses that do not match the contract').toEqual([]);
});
