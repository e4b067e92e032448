import { describe, expect, it } from 'vitest';
import { configChanges, mergeDeclared } from './merge.js';

const key = (id: string) => ({ id, sha256: id.padEnd(64, '0') });
const team = (extra: Record<string, unknown> = {}) => ({
  id: 'support-bot',
  maxInFlight: 4,
  budgets: [{ window: 'month', unit: 'tokens', limit: 60_000, soft: [0.8, 0.95] }],
  keys: [key('support-1')],
  ...extra,
});
const doc = (...tenants: unknown[]) => ({ models: [{ id: 'gpt-4o-mini' }], tenants });

describe('mergeDeclared', () => {
  it('the same document again changes nothing and keeps every admin change', () => {
    const base = doc(team());
    const live = doc(team({ keys: [key('support-1'), key('ops-1')] }));
    expect(mergeDeclared(base, live, base)).toEqual({
      document: live,
      kept: [{ path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' }],
      overridden: [],
    });
  });

  it('applies what the document changed and keeps what the admin API changed elsewhere', () => {
    const base = doc(team(), { id: 'finance-ops' });
    const live = doc(team({ keys: [key('support-1'), key('ops-1')] }), { id: 'finance-ops' });
    const next = doc(team({ maxInFlight: 8 }), { id: 'new-team' });
    const r = mergeDeclared(base, live, next);
    expect(r.document).toEqual(
      doc(team({ maxInFlight: 8, keys: [key('support-1'), key('ops-1')] }), { id: 'new-team' }),
    );
    expect(r.kept).toEqual([{ path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' }]);
    expect(r.overridden).toEqual([]);
  });

  it('where both changed the same field the document wins, and says what it undid', () => {
    const base = doc(team());
    const live = doc(
      team({
        maxInFlight: 16,
        budgets: [{ window: 'month', unit: 'tokens', limit: 90_000, soft: [0.8, 0.95] }],
      }),
    );
    const next = doc(team({ maxInFlight: 2 }));
    const r = mergeDeclared(base, live, next);
    expect(r.document).toEqual(
      doc(
        team({
          maxInFlight: 2,
          budgets: [{ window: 'month', unit: 'tokens', limit: 90_000, soft: [0.8, 0.95] }],
        }),
      ),
    );
    expect(r.overridden).toEqual([
      { path: 'tenants[id=support-bot].maxInFlight', change: 'changed' },
    ]);
    expect(r.kept).toEqual([
      { path: 'tenants[id=support-bot].budgets[month-tokens].limit', change: 'changed' },
    ]);
  });

  it('a tenant the admin API deleted stays deleted unless the document changes it', () => {
    const base = doc(team(), { id: 'finance-ops' });
    const live = doc({ id: 'finance-ops' });
    expect(
      mergeDeclared(base, live, doc(team(), { id: 'finance-ops', mode: 'post' })),
    ).toMatchObject({
      document: doc({ id: 'finance-ops', mode: 'post' }),
      kept: [{ path: 'tenants[id=support-bot]', change: 'removed' }],
    });
    const changed = mergeDeclared(base, live, doc(team({ maxInFlight: 9 }), { id: 'finance-ops' }));
    expect(changed.document).toEqual(doc(team({ maxInFlight: 9 }), { id: 'finance-ops' }));
    expect(changed.overridden).toEqual([{ path: 'tenants[id=support-bot]', change: 'removed' }]);
  });

  it('a tenant the document removes goes, with the keys the admin API gave it', () => {
    const base = doc(team(), { id: 'finance-ops' });
    const live = doc(team({ keys: [key('support-1'), key('ops-1')] }), { id: 'finance-ops' });
    const r = mergeDeclared(base, live, doc({ id: 'finance-ops' }));
    expect(r.document).toEqual(doc({ id: 'finance-ops' }));
    expect(r.overridden).toEqual([
      { path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' },
    ]);
  });

  it('lists without ids are single values', () => {
    const base = doc(team());
    const soft = (s: number[]) =>
      team({ budgets: [{ window: 'month', unit: 'tokens', limit: 60_000, soft: s }] });
    const r = mergeDeclared(base, doc(soft([0.5])), doc(soft([0.9])));
    expect(r.document).toEqual(doc(soft([0.9])));
    expect(r.overridden).toEqual([
      { path: 'tenants[id=support-bot].budgets[month-tokens].soft', change: 'changed' },
    ]);
  });
});

describe('configChanges', () => {
  it('lists each difference at the finest path, list items by id', () => {
    expect(
      configChanges(
        doc(team(), { id: 'gone' }),
        doc(team({ maxInFlight: 5, keys: [] }), { id: 'new' }),
      ),
    ).toEqual([
      { path: 'tenants[id=support-bot].maxInFlight', change: 'changed' },
      { path: 'tenants[id=support-bot].keys[id=support-1]', change: 'removed' },
      { path: 'tenants[id=gone]', change: 'removed' },
      { path: 'tenants[id=new]', change: 'added' },
    ]);
    expect(configChanges(doc(team()), doc(team()))).toEqual([]);
  });
});
