import type { Knex } from 'knex';

/**
 * A Realtime session's record (docs/realtime.md, "Records"): the session is one invocation of its own, written when it
 * closes, and each of its turns is an invocation (with its usage event) that names it.
 *
 * - `invocations.session`: on a session's invocation, `{"turns": n, "closeCode": 1000, "closeReason": "client_closed",
 *   "firstAudioMs": 412.5}` (how many turns it held, how it closed, the latency to its first audio); null on every
 *   other invocation. A session's invocation is not counted among the rollups' calls: its turns are.
 * - `invocations.session_id`: on a turn, the id of its session's invocation (which is also the turn's request id).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table invocations add column session_id uuid, add column session jsonb');
  await knex.raw(
    `alter table invocations add constraint invocations_session_object check (session is null or jsonb_typeof(session) = 'object')`,
  );
  await knex.raw('create index invocations_session_id on invocations (session_id) where session_id is not null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index invocations_session_id');
  await knex.raw('alter table invocations drop constraint invocations_session_object, drop column session, drop column session_id');
}
