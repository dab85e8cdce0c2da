/**
 * The contract lists every error code Nexus answers (`x-error-codes` of the Error body's `code`), and the
 * typed client's ErrorCode is generated from that list: it must be the table of src/errors.ts, no more, no less.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { expect, it } from 'vitest';
import { errorCodes } from '../../src/errors.js';
import { errorCodes as clientErrorCodes } from '../../generated/client/codes.gen.js';
import { projectRoot } from '../support/paths.js';

it("the contract's x-error-codes, the client's ErrorCode and src/errors.ts list the same codes", () => {
  const contract = parse(readFileSync(join(projectRoot, 'openapi', 'openapi.yaml'), 'utf8')) as {
    components: { schemas: { Error: { properties: { error: { properties: { code: { 'x-error-codes': string[] } } } } } } };
  };
  const listed = contract.components.schemas.Error.properties.error.properties.code['x-error-codes'];
  expect(listed).toEqual(errorCodes);
  expect([...clientErrorCodes]).toEqual(errorCodes);
  expect(new Set(errorCodes).size).toBe(errorCodes.length);
});
