import type { ConfigChange } from '@holdfast/events';
import { itemName } from './paths.js';

/**
 * The three-way merge of a declarative document (the config file, `holdfast apply`) into the
 * stored config, as `kubectl apply` does with its last-applied configuration:
 *
 * - base: the last declared document; live: the stored config (base plus what the admin API
 *   changed since); next: the new declared document.
 * - What next changes relative to base is applied to live. What live changed relative to base
 *   and next leaves alone (a key created with `holdfast keys create`) is kept. Where both
 *   changed the same field differently, next wins and the admin change is reported.
 * - Lists whose items have ids (tenants, keys, use cases, models, upstreams, webhooks) and
 *   budgets (by window and unit) merge item by item; other lists (`soft`, a use case's
 *   `models`) are single values.
 */

type Obj = Record<string, unknown>;

export interface MergeResult {
  document: unknown;
  /** Admin changes next left alone: still in the result. */
  kept: ConfigChange[];
  /** Admin changes next undid (next changed the same field). */
  overridden: ConfigChange[];
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A list merged item by item: every item has a name and no two share one. */
function isKeyed(v: unknown): v is unknown[] {
  if (!Array.isArray(v)) return false;
  const names = v.map(itemName);
  return names.every((n) => n !== undefined) && new Set(names).size === names.length;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  }
  if (isObj(a) && isObj(b)) {
    const keys = Object.keys(a).filter((k) => a[k] !== undefined);
    return (
      keys.length === Object.keys(b).filter((k) => b[k] !== undefined).length &&
      keys.every((k) => equal(a[k], b[k]))
    );
  }
  return false;
}

const field = (path: string, key: string) => (path === '' ? key : `${path}.${key}`);

function byName(list: unknown[] | undefined): Map<string, unknown> {
  return new Map((list ?? []).map((item) => [itemName(item)!, item]));
}

/** Every difference from `from` to `to`, at the finest path both sides still share. */
export function configChanges(from: unknown, to: unknown, path = ''): ConfigChange[] {
  if (equal(from, to)) return [];
  if (from === undefined) return [{ path, change: 'added' }];
  if (to === undefined) return [{ path, change: 'removed' }];
  if (isObj(from) && isObj(to)) {
    const keys = [...new Set([...Object.keys(from), ...Object.keys(to)])];
    return keys.flatMap((k) => configChanges(from[k], to[k], field(path, k)));
  }
  if (isKeyed(from) && isKeyed(to)) {
    const [a, b] = [byName(from), byName(to)];
    const names = [...new Set([...a.keys(), ...b.keys()])];
    return names.flatMap((n) => configChanges(a.get(n), b.get(n), `${path}[${n}]`));
  }
  return [{ path, change: 'changed' }];
}

function mergeValue(path: string, base: unknown, live: unknown, next: unknown, r: MergeResult) {
  if (equal(live, next)) return live;
  if (equal(base, next)) {
    r.kept.push(...configChanges(base, live, path));
    return live;
  }
  if (equal(base, live)) return next;
  // Both changed this value. Inside objects and id-lists the two may touch different fields.
  if (isObj(live) && isObj(next) && (base === undefined || isObj(base))) {
    const out: Obj = {};
    for (const k of [...new Set([...Object.keys(next), ...Object.keys(live)])]) {
      const v = mergeValue(field(path, k), base?.[k], live[k], next[k], r);
      if (v !== undefined) out[k] = v;
    }
    return out;
  }
  if (isKeyed(live) && isKeyed(next) && (base === undefined || isKeyed(base))) {
    const [b, l, n] = [byName(base), byName(live), byName(next)];
    const out: unknown[] = [];
    for (const name of [...new Set([...n.keys(), ...l.keys()])]) {
      const v = mergeValue(`${path}[${name}]`, b.get(name), l.get(name), n.get(name), r);
      if (v !== undefined) out.push(v);
    }
    return out;
  }
  r.overridden.push(...configChanges(base, live, path));
  return next;
}

/** Merges `next` into `live` given the `base` both came from; see the module comment. */
export function mergeDeclared(base: unknown, live: unknown, next: unknown): MergeResult {
  const r: MergeResult = { document: undefined, kept: [], overridden: [] };
  r.document = mergeValue('', base, live, next, r);
  return r;
}
