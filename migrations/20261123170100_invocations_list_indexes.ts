import type { Knex } from 'knex';

/**
 * listInvocations filtered by status or model walked the workspace's invocations
 * newest first until a page was full: with 840k invocations in a workspace, a
 * status seen on 1% of them took ~270 ms a page, and a model seen on none a
 * sequential scan of the table. Each filter now reads its rows in id order from
 * (workspace_id, status, id) and (workspace_id, requested_model, id). The price
 * is two more B-tree inserts per gateway call.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invocations', (t) => {
    t.index(['workspace_id', 'status', 'id']);
    t.index(['workspace_id', 'requested_model', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invocations', (t) => {
    t.dropIndex(['workspace_id', 'status', 'id']);
    t.dropIndex(['workspace_id', 'requested_model', 'id']);
  });
}
