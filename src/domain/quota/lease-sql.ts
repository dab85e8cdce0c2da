/**
 * The statements of a quota lease's life that a gateway sends on its calls' path (quota-repo.ts runs them): its
 * acquisition, its extension and its release. Each has positional parameters ($1...), so the gateway's repository
 * sends it as a named statement (src/db/named-query.ts), prepared and planned once per connection of its pool, not at
 * each run; elsewhere, and behind a transaction pooler, the same text goes unnamed. `leaseIdleStatements` is what each
 * new connection of the gateway's pool runs to settle on their plans (src/gateway/gateway-parts.ts, `settle`).
 */
import { NIL_ID, positional, type IdleStatement } from '../../db/named-query.js';

type HoldParam = 'periodId' | 'accessId' | 'need' | 'want' | 'share' | 'now';

/**
 * The hold rule, shared by a lease's acquisition and its extension: on the
 * period (while it covers `now`), hold x = greatest(need, least(want,
 * available / share)) when the period has it; `held` returns x and what remains.
 * To extend, the locked lease row (CTE `lk`) must exist, and nothing (x = 0)
 * is held on a period that has nothing to add, so its expiry is still renewed.
 */
function holdCtes(extending: boolean, at: (name: HoldParam) => string): string {
  return `per as (
           select id, granted_units - reserved_units - consumed_units as avail
             from quota_periods where id = ${at('periodId')} and workspace_access_id = ${at('accessId')}
         ), want as (
           select per.id, greatest(cast(${at('need')} as bigint), least(cast(${at('want')} as bigint), per.avail / cast(${at('share')} as int))) as x
             from per${extending ? ', lk' : ''}
         ), held as (
           update quota_periods qp set reserved_units = qp.reserved_units + want.x
             from want
            where qp.id = want.id and qp.period_start <= ${at('now')} and qp.period_end > ${at('now')}
              and (${extending ? 'want.x = 0 or ' : ''}qp.granted_units - qp.reserved_units - qp.consumed_units >= want.x)
           returning qp.id, want.x, qp.granted_units - qp.reserved_units - qp.consumed_units as remaining
         )`;
}

export interface Acquisition {
  id: string;
  workspaceId: string;
  accessId: string;
  periodId: string;
  need: bigint;
  want: bigint;
  share: number;
  requestId: string;
  now: Date;
  expiresAt: Date;
}

export interface Extension {
  leaseId: string;
  accessId: string;
  periodId: string;
  need: bigint;
  want: bigint;
  share: number;
  now: Date;
  expiresAt: Date;
}

const acquisition = positional([
  'id',
  'workspaceId',
  'accessId',
  'periodId',
  'need',
  'want',
  'share',
  'requestId',
  'now',
  'expiresAt',
] as const satisfies readonly (keyof Acquisition)[]);
const extension = positional([
  'leaseId',
  'accessId',
  'periodId',
  'need',
  'want',
  'share',
  'now',
  'expiresAt',
] as const satisfies readonly (keyof Extension)[]);
const release = positional(['leaseId', 'now'] as const);

/** A new lease: the hold, and the HELD lease row inserted in the same statement. */
export const ACQUIRE_LEASE = `with ${holdCtes(false, acquisition.at)}, hold as (
       insert into quota_leases
         (id, workspace_id, workspace_access_id, quota_period_id, reserved_units, consumed_units, status, request_id,
          created_at, expires_at)
       select cast(${acquisition.at('id')} as uuid), cast(${acquisition.at('workspaceId')} as uuid), cast(${acquisition.at('accessId')} as uuid),
              held.id, held.x, 0, 'HELD', cast(${acquisition.at('requestId')} as text), cast(${acquisition.at('now')} as timestamptz),
              cast(${acquisition.at('expiresAt')} as timestamptz)
         from held
     )
     select (select x from held) as x, (select remaining from held) as remaining`;

/** More units for a HELD lease (its row locked first) and its expiry renewed; `leased`: whether it was still HELD. */
export const EXTEND_LEASE = `with lk as (
       select id from quota_leases where id = ${extension.at('leaseId')} and status = 'HELD' for update
     ), ${holdCtes(true, extension.at)}, ext as (
       update quota_leases r set reserved_units = r.reserved_units + held.x, expires_at = cast(${extension.at('expiresAt')} as timestamptz)
         from held where r.id = cast(${extension.at('leaseId')} as uuid)
     )
     select (select count(*) from lk) as leased, (select x from held) as x, (select remaining from held) as remaining`;

/** A HELD lease RELEASED, what its heartbeat wrote of its calls deleted, what it held back on its period. */
export const RELEASE_LEASE = `with l as (
       update quota_leases set status = 'RELEASED', settled_at = ${release.at('now')}
        where id = ${release.at('leaseId')} and status = 'HELD'
       returning quota_period_id, reserved_units
     ), calls as (
       delete from lease_calls where lease_id = ${release.at('leaseId')}
     )
     update quota_periods qp set reserved_units = qp.reserved_units - l.reserved_units from l where qp.id = l.quota_period_id
     returning qp.id, qp.carried_units`;

/** Numbers as text (a bigint has no JSON form), instants as ISO strings. */
const bound = <T extends { need: bigint; want: bigint; now: Date; expiresAt: Date }>(a: T) => ({
  ...a,
  need: a.need.toString(),
  want: a.want.toString(),
  now: a.now.toISOString(),
  expiresAt: a.expiresAt.toISOString(),
});

export const acquisitionValues = (a: Acquisition) => acquisition.values(bound(a));
export const extensionValues = (e: Extension) => extension.values(bound(e));
export const releaseValues = (leaseId: string, now: Date) => release.values({ leaseId, now: now.toISOString() });

/**
 * The three statements on the nil lease and period: nothing matches, so nothing is written (an acquisition on no
 * period inserts no lease). What each new connection of the gateway's pool runs until it has settled on their plans.
 */
export function leaseIdleStatements(now: Date): IdleStatement[] {
  const ask = { accessId: NIL_ID, periodId: NIL_ID, need: 0n, want: 0n, share: 1, now, expiresAt: now };
  return [
    {
      name: 'nexus_acquire_lease',
      text: ACQUIRE_LEASE,
      values: acquisitionValues({ ...ask, id: NIL_ID, workspaceId: NIL_ID, requestId: 'warm-up' }),
    },
    { name: 'nexus_extend_lease', text: EXTEND_LEASE, values: extensionValues({ ...ask, leaseId: NIL_ID }) },
    { name: 'nexus_release_lease', text: RELEASE_LEASE, values: releaseValues(NIL_ID, now) },
  ];
}
