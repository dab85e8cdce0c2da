/**
 * One version across the server, the API and its client: package.json, the contract's info.version
 * (from which npm run generate writes the client package's), and the CHANGELOG's latest release.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';

const read = (file: string) => readFileSync(join(projectRoot, file), 'utf8');

it('package.json, the contract, @nexus-gateway/client and the CHANGELOG name the same version', () => {
  const version = (JSON.parse(read('package.json')) as { version: string }).version;
  expect(version).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
  expect((parse(read('openapi/openapi.yaml')) as { info: { version: string } }).info.version).toBe(version);
  expect((JSON.parse(read('generated/package.json')) as { version: string }).version).toBe(version);
  expect((JSON.parse(read('package-lock.json')) as { version: string }).version).toBe(version);
  const latest = /^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$/m.exec(read('CHANGELOG.md'))?.[1];
  expect(latest).toBe(version);
});
