import type { Knex } from 'knex';

/**
 * Every gateway call inserts a quota reservation row and a usage event, and a
 * foreign key is a lookup and a key-share lock of the referenced row per
 * inserted row: seven per call here, on the same few hot rows (the workspace,
 * the access, the period). Both rows are written only by statements that take
 * these ids from the reservation or period row they lock in the same statement,
 * and nothing referenced is ever deleted (workspaces, accesses and periods are
 * archived or closed, not removed), so the keys guard nothing those statements
 * do not. Like the invocations' keys (migration 20261122030000), they go.
 */
const KEYS: Record<string, string[]> = {
  quota_reservations: ['workspace_id', 'workspace_access_id', 'quota_period_id'],
  usage_events: ['workspace_id', 'workspace_access_id', 'quota_period_id', 'reservation_id'],
};
const REFERENCED: Record<string, string> = {
  workspace_id: 'workspaces.id',
  workspace_access_id: 'workspace_accesses.id',
  quota_period_id: 'quota_periods.id',
  reservation_id: 'quota_reservations.id',
};

export async function up(knex: Knex): Promise<void> {
  for (const [table, columns] of Object.entries(KEYS)) {
    await knex.schema.alterTable(table, (t) => {
      for (const column of columns) t.dropForeign([column]);
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, columns] of Object.entries(KEYS)) {
    await knex.schema.alterTable(table, (t) => {
      for (const column of columns) t.foreign(column).references(REFERENCED[column]!);
    });
  }
}
