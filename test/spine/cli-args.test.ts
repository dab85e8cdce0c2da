/**
 * The CLI's command line (src/cli-args.ts): what each mistake says. The processes themselves are
 * run in server-process.test.ts (help exits 0 and opens no database; a mistake exits 2).
 */
import { describe, expect, it } from 'vitest';
import { parseCommand, UsageError } from '../../src/cli-args.js';

describe('the CLI command line', () => {
  it('reads each command', () => {
    for (const args of [['--help'], ['help'], ['management-keys', 'create', '-h']]) expect(parseCommand(args)).toEqual({ name: 'help' });
    expect(parseCommand(['migrate'])).toEqual({ name: 'migrate' });
    expect(parseCommand(['management-keys', 'create', '--workspace', 'a', '--workspace', 'b', '--name', 'ci'])).toEqual({
      name: 'create',
      keyName: 'ci',
      workspaceIds: ['a', 'b'],
    });
    expect(parseCommand(['management-keys', 'create', '--workspace', 'a', '--role', 'viewer'])).toEqual({
      name: 'create',
      keyName: 'scoped',
      workspaceIds: ['a'],
      role: 'viewer',
    });
    expect(parseCommand(['management-keys', 'list'])).toEqual({ name: 'list' });
    expect(parseCommand(['management-keys', 'revoke', 'k'])).toEqual({ name: 'revoke', keyId: 'k' });
    expect(parseCommand(['archive', 'verify', 'a.manifest.json', 'b.manifest.json'])).toEqual({
      name: 'archive-verify',
      manifests: ['a.manifest.json', 'b.manifest.json'],
    });
    expect(parseCommand(['archive', 'fetch', 's3://b/h/a.manifest.json', 's3://b/h/b.manifest.json', 'restore'])).toEqual({
      name: 'archive-fetch',
      manifests: ['s3://b/h/a.manifest.json', 's3://b/h/b.manifest.json'],
      dir: 'restore',
    });
  });

  it('says what is wrong with a command line', () => {
    const refused: [string[], string][] = [
      [[], 'Name a command'],
      [['frobnicate'], "Unknown command 'frobnicate'"],
      [['management-keys'], 'Name a management-keys command'],
      [['management-keys', 'create', '--workspace'], "Option '--workspace <value>' argument missing"],
      [['management-keys', 'create', '--workspace', 'x', '--bogus'], "Unknown option '--bogus'"],
      [['management-keys', 'create', '--workspace', 'x', '--name', '  '], '--name must hold a non-blank character'],
      [
        ['management-keys', 'create', '--workspace', 'x', '--role', 'owner'],
        '--role must be one of admin, developer, billing, support, viewer',
      ],
      [['management-keys', 'list', 'extra'], "Unexpected argument 'extra'"],
      [['management-keys', 'revoke'], 'Name the key to revoke'],
      [['management-keys', 'revoke', 'a', 'b'], "Unexpected argument 'b'"],
      [['migrate', '--force'], "Unknown option '--force'"],
      [['archive'], 'Name an archive command'],
      [['archive', 'restore'], "Unknown archive command 'restore'"],
      [['archive', 'verify'], 'Name the manifests to verify'],
    ];
    for (const [args, message] of refused) {
      let thrown: unknown;
      try {
        parseCommand(args);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, args.join(' ')).toBeInstanceOf(UsageError);
      expect((thrown as Error).message.startsWith(message), `${args.join(' ')}: ${(thrown as Error).message}`).toBe(true);
    }
  });
});
