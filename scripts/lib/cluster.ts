/** The PostgreSQL server the scripts make their fresh databases on (DATABASE_URL, default the local one). */
import pg from 'pg';

export const CLUSTER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** One statement on the server's default database, on a connection of its own (`create database`, `drop database`). */
export async function onCluster(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: CLUSTER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
