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
