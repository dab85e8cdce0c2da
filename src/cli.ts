/**
 * `npm run nexus -- <command>`:
 *   migrate                                       apply pending migrations
 *   management-keys create --workspace ID [--workspace ID ...] [--name NAME]
 *   management-keys list
 *   management-keys revoke KEY_ID
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
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

async function main(argv: string[]): Promise<number> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  const config = loadConfig();
  const db = createDatabase({
    databaseUrl: config.databaseUrl,
    schema: config.databaseSchema,
    pgliteDir: config.databaseUrl ? undefined : `${config.dataDir}/pgdata`,
  });
  try {
    const applied = await migrateLatest(db, config.databaseSchema);
    const [command, sub, ...rest] = argv;
    if (command === 'migrate') {
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'already up to date');
      return 0;
    }
    if (command !== 'management-keys') {
      console.error(usage);
      return 2;
    }
    const services = createServices({ db, config, clock: systemClock, logger: createLogger('silent'), fetch });
    const actor = systemActor('cli');
    if (sub === 'create') {
      const { values } = parseArgs({
        args: rest,
        options: { workspace: { type: 'string', multiple: true }, name: { type: 'string' } },
      });
      const created = await services.managementKeys.createScoped(actor, {
        name: values.name ?? 'scoped',
        workspaceIds: values.workspace ?? [],
      });
      console.log(`Created management key ${created.id} (shown only this once):\n\n  ${created.key}\n`);
      return 0;
    }
    if (sub === 'list') {
      for (const k of await services.managementKeys.list()) {
        const scope = k.is_root ? 'root' : k.workspace_ids.join(',');
        console.log(`${k.id}  ${k.prefix}...  ${k.name}  ${scope}  ${k.revoked_at ? 'revoked' : 'active'}`);
      }
      return 0;
    }
    if (sub === 'revoke' && rest[0]) {
      const revoked = await services.managementKeys.revoke(actor, rest[0]);
      console.log(revoked ? 'revoked' : 'no active key with that id');
      return revoked ? 0 : 1;
    }
    console.error(usage);
    return 2;
  } catch (err) {
    console.error(err instanceof AppError ? `error: ${err.message}` : err);
    return 1;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // Before the database is open: bad configuration, or the embedded database is in use.
    console.error(err instanceof ConfigError ? `error: ${err.message}` : err);
    process.exit(1);
  },
);
