/**
 * The CLI's command line (src/cli.ts), read before any database is opened.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

export const usage = `usage:
  npm run nexus -- migrate
  npm run nexus -- login-link
  npm run nexus -- management-keys create --workspace ID [--workspace ID ...] [--name NAME] [--role ROLE]
  npm run nexus -- management-keys list
  npm run nexus -- management-keys revoke KEY_ID
  npm run nexus -- archive verify MANIFEST [MANIFEST ...]   (<partition>.manifest.json: paths, or s3://bucket/key URLs)
  npm run nexus -- archive fetch MANIFEST [MANIFEST ...] DIR   (archives' files and manifests, checked, copied into DIR)`;

/** The roles a scoped key may carry (docs/people.md): held to the role table in each of its workspaces. */
const SCOPED_KEY_ROLES = ['admin', 'developer', 'billing', 'support', 'viewer'] as const;
type ScopedKeyRole = (typeof SCOPED_KEY_ROLES)[number];

/** A command line that names no command, or names one wrongly: exit code 2, with the usage. */
export class UsageError extends Error {}

export type Command =
  | { name: 'help' }
  | { name: 'migrate' }
  | { name: 'login-link' }
  | { name: 'create'; keyName: string; workspaceIds: string[]; role?: ScopedKeyRole }
  | { name: 'list' }
  | { name: 'revoke'; keyId: string }
  | { name: 'archive-verify'; manifests: string[] }
  | { name: 'archive-fetch'; manifests: string[]; dir: string };

/** parseArgs, with its refusals (unknown option, missing value, extra argument) as usage errors. */
function parse(args: string[], options: ParseArgsConfig['options'] = {}, positionals = 0) {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.positionals.length > positionals) throw new UsageError(`Unexpected argument '${parsed.positionals[positionals]}'`);
  return parsed;
}

/** The command the arguments name, or a UsageError saying what is wrong with them. */
export function parseCommand(argv: string[]): Command {
  if (argv.includes('--help') || argv.includes('-h') || argv[0] === 'help') return { name: 'help' };
  const [command, sub, ...rest] = argv;
  if (command === undefined) throw new UsageError('Name a command');
  if (command === 'migrate') {
    parse(argv.slice(1));
    return { name: 'migrate' };
  }
  if (command === 'login-link') {
    parse(argv.slice(1));
    return { name: 'login-link' };
  }
  if (command === 'archive') {
    if (sub === 'fetch') {
      const { positionals } = parse(rest, {}, Infinity);
      if (positionals.length < 2) throw new UsageError('Name the manifests to fetch, then the directory to copy them into');
      return { name: 'archive-fetch', manifests: positionals.slice(0, -1), dir: positionals.at(-1)! };
    }
    if (sub !== 'verify') throw new UsageError(sub === undefined ? 'Name an archive command' : `Unknown archive command '${sub}'`);
    const { positionals } = parse(rest, {}, Infinity);
    if (!positionals.length) throw new UsageError('Name the manifests to verify (<partition>.manifest.json)');
    return { name: 'archive-verify', manifests: positionals };
  }
  if (command !== 'management-keys') throw new UsageError(`Unknown command '${command}'`);
  if (sub === 'create') {
    const { values } = parse(rest, { workspace: { type: 'string', multiple: true }, name: { type: 'string' }, role: { type: 'string' } });
    const keyName = (values.name as string | undefined) ?? 'scoped';
    if (!/\S/.test(keyName)) throw new UsageError('--name must hold a non-blank character');
    if (keyName.length > 200) throw new UsageError('--name must be at most 200 characters');
    const role = values.role as string | undefined;
    if (role !== undefined && !SCOPED_KEY_ROLES.includes(role as ScopedKeyRole)) {
      throw new UsageError(`--role must be one of ${SCOPED_KEY_ROLES.join(', ')}`);
    }
    const workspaceIds = (values.workspace as string[] | undefined) ?? [];
    return { name: 'create', keyName, workspaceIds, ...(role ? { role: role as ScopedKeyRole } : {}) };
  }
  if (sub === 'list') {
    parse(rest);
    return { name: 'list' };
  }
  if (sub === 'revoke') {
    const { positionals } = parse(rest, {}, 1);
    if (!positionals[0]) throw new UsageError('Name the key to revoke (its id, from management-keys list)');
    return { name: 'revoke', keyId: positionals[0] };
  }
  throw new UsageError(sub === undefined ? 'Name a management-keys command' : `Unknown management-keys command '${sub}'`);
}
