import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'chdb';
import type { SqlExecutor } from '../src/clickhouse.js';

/** Current ClickHouse in-process (chdb) behind the same port the service uses. */
export async function chdbExecutor(): Promise<SqlExecutor> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-chdb-'));
  const session = new Session(dir);
  let inserts = 0;
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
    // chdb takes SQL text only, so the binary body goes through a file and `file()`, with
    // the column types read back from the table (current ClickHouse parses our RowBinary).
    insertRowBinary: async (table, columns, body) => {
      const [database, name] = table.text.replaceAll('`', '').split('.');
      const types = new Map(
        parse(
          session.query(
            `SELECT name, type FROM system.columns WHERE database = '${database}' AND table = '${name}'`,
            'JSONEachRow',
          ),
        ).map((r) => [r.name as string, r.type as string]),
      );
      const structure = columns
        .map((c) => `${c} ${types.get(c)}`)
        .join(', ')
        .replaceAll("'", "\\'");
      const file = join(dir, `insert-${++inserts}.bin`);
      await writeFile(file, body);
      session.query(
        `INSERT INTO ${table.text} (${columns.join(', ')}) SELECT * FROM file('${file}', 'RowBinary', '${structure}')`,
      );
      await rm(file);
    },
    ping: () => Promise.resolve(true),
    close: async () => {
      session.cleanup();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
