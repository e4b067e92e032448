import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'chdb';
import type { SqlExecutor } from '../src/clickhouse.js';

/** Current ClickHouse in-process (chdb) behind the same port the service uses. */
export async function chdbExecutor(): Promise<SqlExecutor> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-chdb-'));
  const session = new Session(dir);
  const parse = (text: string) =>
    text
      .split('\n')
      .filter((l) => l.trim().length > 0)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    command: (statement) => {
      session.query(statement.text);
      return Promise.resolve();
    },
    query: <T>(statement: { text: string }) =>
      Promise.resolve(parse(session.query(statement.text, 'JSONEachRow')) as T[]),
    insert: (table, rows) => {
      const body = rows.map((r) => JSON.stringify(r)).join('\n');
      session.query(`INSERT INTO ${table.text} FORMAT JSONEachRow\n${body}`);
      return Promise.resolve();
    },
    ping: () => Promise.resolve(true),
    close: async () => {
      session.cleanup();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
