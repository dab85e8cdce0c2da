/**
 * `npm run nexus -- <command>`:
 *   migrate                                       apply pending migrations
 *   login-link                                    print a one-time link that signs the owner in to the console
 *   management-keys create --workspace ID [--workspace ID ...] [--name NAME]
 *   management-keys list
 *   management-keys revoke KEY_ID
 *   archive verify MANIFEST [MANIFEST ...]        re-read archives' files, compare rows and checksums (a path, or
 *                                                 s3://bucket/key with NEXUS_ARCHIVE_S3_* and the AWS SDK's credentials)
 *   archive fetch MANIFEST [MANIFEST ...] DIR     copy archives (their files checked, then their manifests) into DIR
 *
 * The command line is read before the database is opened: `--help` and a
 * mistyped command answer at once, without migrating (or, with the embedded
 * database, taking it from a running server).
 */
import { existsSync } from 'node:fs';
import { parseCommand, usage, UsageError, type Command } from './cli-args.js';
import { ConfigError, loadConfig } from './config.js';
import { createDatabase } from './db/database.js';
import { migrateLatest } from './db/migrate.js';
import { systemActor } from './domain/actor.js';
import { archiveS3AccessOf } from './config-archive.js';
import { copyManifest, manifestStore, verifyManifest } from './domain/history/archive.js';
import { dirStore } from './domain/history/archive-store.js';
import { createServices } from './domain/services.js';
import { AppError } from './errors.js';
import { createLogger } from './observability/logger.js';
import { systemClock } from './domain/actor.js';

/** A database that cannot be reached (or a driver error) in one line; anything else with its stack. */
function describe(err: unknown): string {
  if (err instanceof AppError || err instanceof ConfigError) return `error: ${err.message}`;
  const code = (err as { code?: unknown })?.code;
  if (err instanceof Error && typeof code === 'string') return `error: ${err.message} (${code})`;
  return String((err as Error)?.stack ?? err);
}

/** Each file of each manifest read again; 0 when every one matches its rows and checksum. */
async function verifyArchives(manifestPaths: string[]): Promise<number> {
  let failed = 0;
  for (const path of manifestPaths) {
    const { store, name } = manifestStore(path, () => archiveS3AccessOf(process.env));
    const { manifest, files } = await verifyManifest(store, name);
    for (const f of files) console.log(f.ok ? `ok        ${f.file}` : `MISMATCH  ${f.file}: ${f.problem}`);
    const bad = files.filter((f) => !f.ok).length;
    console.log(
      bad
        ? `${manifest.partition}: ${bad} of ${files.length} files do not match the manifest`
        : `${manifest.partition}: ${manifest.rows} rows in ${files.length} files, as the manifest says`,
    );
    if (bad) failed++;
  }
  return failed ? 1 : 0;
}

/** Archives (a bucket's, say) copied into a directory, to restore from them there; 0 when every file matched. */
async function fetchArchives(manifestPaths: string[], dir: string): Promise<number> {
  let failed = 0;
  for (const path of manifestPaths) {
    const { store, name } = manifestStore(path, () => archiveS3AccessOf(process.env));
    const { manifest, files } = await copyManifest(store, name, dirStore(dir));
    for (const f of files) console.log(f.ok ? `copied    ${f.file}` : `MISMATCH  ${f.file}: ${f.problem}`);
    const bad = files.filter((f) => !f.ok).length;
    console.log(
      bad
        ? `${manifest.partition}: ${bad} of ${files.length} files do not match the manifest; its manifest was not copied`
        : `${manifest.partition}: ${manifest.rows} rows in ${files.length} files copied to ${dir}`,
    );
    if (bad) failed++;
  }
  return failed ? 1 : 0;
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
  // Files only (or a bucket's objects): no configuration but the S3 store's, no database.
  if (command.name === 'archive-verify') return verifyArchives(command.manifests);
  if (command.name === 'archive-fetch') return fetchArchives(command.manifests, command.dir);
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
    if (command.name === 'login-link') {
      const link = await services.people.signIn.createLoginLink();
      const base = config.publicUrl ?? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`;
      console.log(
        `Open this link to sign in to the console as the owner (once, until ${link.expiresAt.toISOString()}):\n\n` +
          `  ${base}/auth/link?token=${link.token}\n`,
      );
      return 0;
    }
    if (command.name === 'create') {
      const created = await services.managementKeys.createScoped(actor, {
        name: command.keyName,
        workspaceIds: command.workspaceIds,
        role: command.role,
      });
      console.log(`Created management key ${created.id} (shown only this once):\n\n  ${created.key}\n`);
      return 0;
    }
    if (command.name === 'list') {
      for (const k of await services.managementKeys.list()) {
        const scope = (k.is_root ? 'root' : k.workspace_ids.join(',')) + (k.role ? ` as ${k.role}` : '');
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
