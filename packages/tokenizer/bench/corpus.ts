import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Real English/Markdown (the READMEs under the workspace's node_modules, about 4M characters),
 * so the BPE merge cache sees realistic text.
 */
export function corpus(): string {
  const store = fileURLToPath(new URL('../../../node_modules/.pnpm', import.meta.url));
  const parts: string[] = [];
  let size = 0;
  const walk = (dir: string, depth: number): void => {
    for (const name of readdirSync(dir)) {
      if (size > 4_000_000) return;
      const path = join(dir, name);
      const stat = statSync(path, { throwIfNoEntry: false });
      if (stat?.isDirectory() && depth < 4) walk(path, depth + 1);
      else if (stat?.isFile() && name.endsWith('.md') && stat.size > 8_000) {
        parts.push(readFileSync(path, 'utf8'));
        size += stat.size;
      }
    }
  };
  walk(store, 0);
  return parts.join('\n\n');
}

/** Slices of a text, each one after the last (wrapping around), `chars` long. */
export function slicer(text: string): (chars: number) => string {
  let cursor = 0;
  return (chars) => {
    if (cursor + chars > text.length) cursor = 0;
    const slice = text.slice(cursor, cursor + chars);
    cursor += chars;
    return slice;
  };
}
