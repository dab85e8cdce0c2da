/**
 * `npm run nexus -- <command>`:
 *   migrate                                       apply pending migrations
 *   management-keys create --workspace ID [--workspace ID ...] [--name NAME]
 *   management-keys list
 *   management-keys revoke KEY_ID
 *
 * The command line is read before the database is opened: `--help` and a
 * mistyped command answer at once, without migrating (or, with the embedded
 * database, taking it from a running server).
 */
import { existsSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig } from './config.js';
import { createDatabase } from './db/database.js';
import { migrateLatest } from './db/migrate.js';
import { systemActor } from './domain/actor.js';
import { createServices } from './domain/services.js';
import { AppError } from './errors.js';
import { createLogger } from './observability/logger.js';
import { systemClock } from './domain/actor.js';

const usage = `usage:
  npm run nexus -- migrate
  npm run nexus -- management-keys create --workspace ID [--workspace ID ...] [--name NAME]
  npm run nexus -- management-keys list
  npm run nexus -- management-keys revoke KEY_ID`;

/** A command line that names no command, or names one wrongly: exit code 2, with the usage. */
class UsageError extends Error {}

type Command =
  | { name: 'help' }
  | { name: 'migrate' }
  | { name: 'create'; keyName: string; workspaceIds: string[] }
  | { name: 'list' }
  | { name: 'revoke'; keyId: string };

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

function parseCommand(argv: string[]): Command {
  if (argv.includes('--help') || argv.includes('-h') || argv[0] === 'help') return { name: 'help' };
  const [command, sub, ...rest] = argv;
  if (command === undefined) throw new UsageError('Name a command');
  if (command === 'migrate') {
    parse(argv.slice(1));
    return { name: 'migrate' };
  }
  if (command !== 'management-keys') throw new UsageError(`Unknown command '${command}'`);
  if (sub === 'create') {
    const { values } = parse(rest, { workspace: { type: 'string', multiple: true }, name: { type: 'string' } });
    const keyName = (values.name as string | undefined) ?? 'scoped';
    if (!/\S/.test(keyName)) throw new UsageError('--name must hold a non-blank character');
    if (keyName.length > 200) throw new UsageError('--name must be at most 200 characters');
    return { name: 'create', keyName, workspaceIds: (values.workspace as string[] | undefined) ?? [] };
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

/** A database that cannot be reached (or a driver error) in one line; anything else with its stack. */
function describe(err: unknown): string {
  if (err instanceof AppError || err instanceof ConfigError) return `error: ${err.message}`;
  const code = (err as { code?: unknown })?.code;
  if (err instanceof Error && typeof code === 'string') return `error: ${err.message} (${code})`;
  return String((err as Error)?.stack ?? err);
}

async function main(argv: string[]): Promise<number> {
  let command: Command;
  try {
    command = parseCommand(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`error: ${err.message}\n${usage}`);
    return 2;
  }
  if (command.name === 'help') {
    console.log(usage);
    return 0;
  }
  if (existsSync('.env')) process.loadEnvFile('.env');
  const config = loadConfig();
  const db = createDatabase({
    databaseUrl: config.databaseUrl,
    schema: config.databaseSchema,
    pgliteDir: config.databaseUrl ? undefined : `${config.dataDir}/pgdata`,
    // What fails is said once, on stderr, by describe().
    log: () => {},
  });
  try {
    const applied = await migrateLatest(db, config.databaseSchema);
    if (command.name === 'migrate') {
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'already up to date');
      return 0;
    }
    const services = createServices({ db, config, clock: systemClock, logger: createLogger('silent'), fetch });
    const actor = systemActor('cli');
    if (command.name === 'create') {
      const created = await services.managementKeys.createScoped(actor, { name: command.keyName, workspaceIds: command.workspaceIds });
      console.log(`Created management key ${created.id} (shown only this once):\n\n  ${created.key}\n`);
      return 0;
    }
    if (command.name === 'list') {
      for (const k of await services.managementKeys.list()) {
        const scope = k.is_root ? 'root' : k.workspace_ids.join(',');
        console.log(`${k.id}  ${k.prefix}...  ${k.name}  ${scope}  ${k.revoked_at ? 'revoked' : 'active'}`);
      }
      return 0;
    }
    const revoked = await services.managementKeys.revoke(actor, command.keyId);
    console.log(revoked ? 'revoked' : 'no active key with that id');
    return revoked ? 0 : 1;
  } catch (err) {
    console.error(describe(err));
    return 1;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // Before the database is open: bad configuration, or the embedded database is in use.
    console.error(describe(err));
    process.exit(1);
  },
);
