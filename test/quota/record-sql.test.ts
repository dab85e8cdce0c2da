/**
 * The record statement (src/domain/recording/record-sql.ts) as it is composed from its named parts: which parts, in
 * which order, each with its CTEs, and the whole statement printed part by part (__snapshots__/record-sql.sql), so a
 * reader sees what one round trip writes for a batch of calls, priced, crossing a threshold. The same statement
 * records every batch; test/quota/record-sql.api.test.ts runs it for such a call.
 */
import { describe, expect, it } from 'vitest';
import { priceOfCall } from '../../src/domain/recording/price-sql.js';
import {
  reclaimParts,
  RECLAIM_EXPIRED_SQL,
  recordCallsParts,
  recordCallsSql,
  type StatementPart,
} from '../../src/domain/recording/record-sql.js';

/** The names of the CTEs a `with` list declares at its top level (`name as (`), in order. */
function cteNames(ctes: string): string[] {
  const names: string[] = [];
  let depth = 0;
  for (let i = 0; i < ctes.length; i++) {
    if (ctes[i] === '(') depth++;
    else if (ctes[i] === ')') depth--;
    else if (depth === 0 && (i === 0 || /[\s,]/.test(ctes[i - 1]!))) {
      const declared = /^([a-z_]+) as \(/.exec(ctes.slice(i));
      if (declared) names.push(declared[1]!);
    }
  }
  return names;
}

/** The statement's own `select`, after the parts' CTEs. */
function finalSelect(parts: StatementPart[], sql: string): string {
  const head = `\nwith ${parts.map((p) => p.ctes).join(', ')}\n`;
  expect(sql.startsWith(head), 'the statement is `with` the parts in their order, then its select').toBe(true);
  return sql.slice(head.length);
}

/** The statement printed part by part, each under a comment that names it. */
function printed(parts: StatementPart[], sql: string, selectName: string): string {
  const lines = ['with'];
  parts.forEach((p, i) => lines.push(`-- ${p.name}`, p.ctes.trim() + (i < parts.length - 1 ? ',' : '')));
  lines.push(`-- ${selectName}`, finalSelect(parts, sql));
  return lines.join('\n') + '\n';
}

const normalized = (sql: string) =>
  sql
    .replace(/--[^\n]*\n/g, '')
    .replace(/\s+/g, ' ')
    .trim();

describe('the record statement, composed from named parts', () => {
  const parts = recordCallsParts();
  const sql = recordCallsSql();

  it('is its parts in order, each its own CTEs, then the costs per series', () => {
    expect(parts.map((p) => [p.name, cteNames(p.ctes)])).toEqual([
      ['the invocations recorded', ['recorded']],
      ['the leases settled', ['lc', 'l', 'settled']],
      ['the periods charged', ['p']],
      ['the usage events, priced', ['u', 'a', 'new_events']],
      ['the thresholds crossed', ['crossed', 'marks', 'threshold_events', 'threshold_messages']],
      [
        'the usage rollups',
        ['rolled_rows', 'rolled', 'rolled_series', 'rolled_day_rows', 'rolled_days', 'rolled_day_series', 'rolled_late'],
      ],
    ]);
    expect(finalSelect(parts, sql)).toMatch(
      /^select u\.workspace_id, r\.provider_connection_id as connection_id, .* from u join recorded r /s,
    );
    // Two placeholders, bound in this order by call-repo.ts: $1 the lease calls, $2 the invocations.
    expect([...new Set(sql.match(/\$\d+/g))]).toEqual(['$2', '$1']);
    expect(parts[0]!.ctes).toContain('cast($2 as nexus_invocation_input[])');
    expect(parts[1]!.ctes).toContain('cast($1 as nexus_lease_call_input[])');
  });

  it('prices each USAGE event by the price part, joined inside the usage events', () => {
    expect(parts[3]!.ctes).toContain(priceOfCall('s'));
    expect(sql.split(priceOfCall('s'))).toHaveLength(2);
  });

  it('leaves the rollups out when asked (scripts/bench-rollup.ts), and is otherwise the same statement', () => {
    const without = recordCallsParts(false);
    expect(without.map((p) => p.name)).toEqual(parts.slice(0, -1).map((p) => p.name));
    expect(finalSelect(without, recordCallsSql(false))).toBe(finalSelect(parts, sql));
  });

  it('prints the whole statement, part by part, for a priced call crossing a threshold', async () => {
    const text = printed(parts, sql, 'the costs recorded, per workspace, connection and model');
    expect(normalized(text)).toBe(normalized(sql));
    await expect(text).toMatchFileSnapshot('./__snapshots__/record-sql.sql');
  });
});

describe('the reclaim of dead processes’ leases, composed from the same parts', () => {
  const parts = reclaimParts();

  it('settles the calls their heartbeat wrote by the record’s rules: usage events priced, rollups, thresholds', () => {
    expect(parts.map((p) => [p.name, cteNames(p.ctes)])).toEqual([
      ['the leases expired', ['expired', 'calls']],
      ['the invocations recorded', ['recorded']],
      ['the calls charged', ['charged']],
      ['the usage events, priced', ['u', 'a', 'new_events']],
      [
        'the usage rollups',
        ['rolled_rows', 'rolled', 'rolled_series', 'rolled_day_rows', 'rolled_days', 'rolled_day_series', 'rolled_late'],
      ],
      ['the periods given back and charged', ['held', 'used', 'p']],
      ['the thresholds crossed', ['crossed', 'marks', 'threshold_events', 'threshold_messages']],
    ]);
    const record = recordCallsParts();
    for (const name of ['the usage events, priced', 'the usage rollups', 'the thresholds crossed']) {
      const part = (of: StatementPart[]) => of.find((p) => p.name === name)!.ctes;
      expect(part(parts), name).toBe(part(record).replaceAll('from settled', 'from charged'));
    }
    expect(finalSelect(parts, RECLAIM_EXPIRED_SQL)).toMatch(/^select p\.id as quota_period_id, p\.carried_units, /);
  });
});
