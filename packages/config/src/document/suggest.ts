import type { z } from 'zod';

/** Edit distance (insert, delete, replace, swap of neighbours), for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest known name to a typo, when it is close enough to be what was meant. */
export function didYouMean(typo: string, known: readonly string[]): string | undefined {
  const lower = typo.toLowerCase();
  let best: { name: string; d: number } | undefined;
  for (const name of known) {
    const d = name.toLowerCase() === lower ? 0 : distance(lower, name.toLowerCase());
    if (best === undefined || d < best.d) best = { name, d };
  }
  // One edit in four characters at most (`budget` -> `budgets`, `maxInflight` -> `maxInFlight`).
  return best && best.d <= Math.max(1, Math.floor(typo.length / 4)) ? best.name : undefined;
}

type Def = {
  type: string;
  innerType?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
};

/** The object schema a path leads to (through defaults, optionals and arrays), if any. */
function schemaAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  const unwrap = (s: z.ZodType): z.ZodType => {
    const def = s._zod.def as unknown as Def;
    return def.innerType && ['default', 'optional', 'nullable', 'prefault'].includes(def.type)
      ? unwrap(def.innerType)
      : s;
  };
  let at: z.ZodType | undefined = unwrap(schema);
  for (const seg of path) {
    const def = at._zod.def as unknown as Def;
    if (def.type === 'object' && typeof seg === 'string') at = def.shape?.[seg];
    else if (def.type === 'array' && typeof seg === 'number') at = def.element;
    else return undefined;
    if (at === undefined) return undefined;
    at = unwrap(at);
  }
  return at;
}

/** The field names an object schema knows at a path (empty when the path leads elsewhere). */
export function fieldsAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  const at = schemaAt(schema, path);
  const def = at?._zod.def as unknown as Def | undefined;
  return def?.type === 'object' && def.shape ? Object.keys(def.shape) : [];
}
