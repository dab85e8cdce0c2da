import type { Knex } from 'knex';

/**
 * listUsageEvents filtered by workspaceAccessId or kind read every event of the
 * workspace (one end user's events among a workspace's 600k: ~300 ms, and again
 * for each page; kind=ADJUSTMENT a sequential scan of the table). The access's
 * events are read in id order from (workspace_access_id, id), as its invocations
 * already are. Adjustments are rare: a partial index holds only them, so the
 * gateway's USAGE events (one per call) never enter it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('usage_events', (t) => {
    t.index(['workspace_access_id', 'id']);
  });
  await knex.raw(`create index usage_events_adjustments on usage_events (workspace_id, id) where kind = 'ADJUSTMENT'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index usage_events_adjustments');
  await knex.schema.alterTable('usage_events', (t) => {
    t.dropIndex(['workspace_access_id', 'id']);
  });
}
