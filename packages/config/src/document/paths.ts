/**
 * Paths into a config document as a user reads them: list items by their id, not their
 * position. `tenants[5].budgets[0].limit` becomes `tenants[id=support-bot].budgets[month-tokens].limit`.
 */

type Segment = PropertyKey;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * How a list item is named: `id=<id>` when it has an id, `<window>-<unit>` for a budget (the
 * id the admin API gives it); undefined for anything else (a number, a string).
 */
export function itemName(item: unknown): string | undefined {
  if (!isRecord(item)) return undefined;
  if (typeof item.id === 'string' && item.id !== '') return `id=${item.id}`;
  if (typeof item.window === 'string') {
    return `${item.window}-${typeof item.unit === 'string' ? item.unit : 'tokens'}`;
  }
  return undefined;
}

/** The item's name when no other item of its list has the same one, else its position. */
function nameIn(list: unknown[], index: number): string {
  const name = itemName(list[index]);
  if (name === undefined) return String(index);
  return list.filter((x) => itemName(x) === name).length === 1 ? name : String(index);
}

/**
 * Renders a path (zod's issue path) against the document it points into. Without a document,
 * or where the document has no usable id, positions stay.
 */
export function renderPath(path: readonly Segment[], doc?: unknown): string {
  let out = '';
  let at: unknown = doc;
  for (const seg of path) {
    if (typeof seg === 'number') {
      out += `[${Array.isArray(at) ? nameIn(at, seg) : seg}]`;
      at = Array.isArray(at) ? at[seg] : undefined;
    } else {
      const key = String(seg);
      out += out === '' ? key : `.${key}`;
      at = isRecord(at) ? at[key] : undefined;
    }
  }
  return out;
}
