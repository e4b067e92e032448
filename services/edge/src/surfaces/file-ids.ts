import { FILE_ID, ItemId } from '@holdfast/events';

/**
 * What a `file_id` a call names is to the ownership check: `owned`, a file a call's code could
 * have written (FILE_ID, an ItemId: the authority refuses another team's); `disguised`, one that
 * reads as such a file once spaces, invisible characters, width and case are set aside but is
 * not one exactly (no call made it, and a lenient reader upstream could take it for one: refused
 * as unknown); `shared`, any other (the operator's upload, `file-...`: every team's).
 */
export function fileIdKind(id: string): 'owned' | 'disguised' | 'shared' {
  if (FILE_ID.test(id) && ItemId.safeParse(id).success) return 'owned';
  return FILE_ID.test(canonical(id)) ? 'disguised' : 'shared';
}

/** An id as a lenient reader might take it: compatibility forms, no spaces or invisibles, lowercase. */
const canonical = (id: string) =>
  id
    .normalize('NFKC')
    .replace(/[\s\u200b-\u200d\u2060\ufeff]/gu, '')
    .toLowerCase();

/** The files a request names by `file_id`: the owned ones, each once, and the first disguised. */
export interface NamedFiles {
  ids: string[];
  disguised?: string;
}

/**
 * Every `file_id` (and `file_ids` entry) of the objects under `roots`, however nested (no
 * recursion: a deep body cannot overflow it), by kind (fileIdKind). `skip` leaves an object's
 * field out (what the provider never reads as a file: a tool call's own arguments).
 */
export function walkFileIds(
  roots: unknown[],
  skip: (o: Record<string, unknown>, key: string) => boolean = () => false,
): NamedFiles {
  const ids = new Set<string>();
  let disguised: string | undefined;
  const name = (id: unknown) => {
    if (typeof id !== 'string') return;
    const kind = fileIdKind(id);
    if (kind === 'owned') ids.add(id);
    else if (kind === 'disguised') disguised ??= id;
  };
  const stack: unknown[] = [...roots].reverse();
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== 'object' || value === null) continue;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push(value[i]);
      continue;
    }
    const o = value as Record<string, unknown>;
    name(o.file_id);
    if (Array.isArray(o.file_ids)) for (const id of o.file_ids as unknown[]) name(id);
    for (const [key, child] of Object.entries(o)) {
      if (typeof child === 'object' && !skip(o, key)) stack.push(child);
    }
  }
  return { ids: [...ids], ...(disguised === undefined ? {} : { disguised }) };
}
