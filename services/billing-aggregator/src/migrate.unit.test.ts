import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLogger } from '@holdfast/runtime';
import { describe, expect, it } from 'vitest';
import type { SqlExecutor } from './clickhouse.js';
import {
  loadMigrations,
  migrate,
  migrateWhenReachable,
  MigrationError,
  render,
  splitStatements,
} from './migrate.js';

const logger = createLogger({ name: 'test', level: 'silent' });

describe('migrations', () => {
  it('are named NNN_verb_table_vN.sql, numbered without gaps, re-runnable, and only use {{db}} names', async () => {
    const ms = await loadMigrations();
    expect(ms.map((m) => m.version)).toEqual(ms.map((_, i) => i + 1));
    for (const m of ms) {
      for (const s of m.statements) {
        // Every statement can run twice: created if absent, dropped if present, a column
        // added unless the table has it (one per statement, so the runner can tell).
        expect(s).toMatch(
          /^((CREATE (TABLE|VIEW|MATERIALIZED VIEW) IF NOT EXISTS|DROP TABLE IF EXISTS) \{\{db\}\}\.|ALTER TABLE \{\{db\}\}\.[a-z0-9_]+ ADD COLUMN [a-z0-9_]+ [A-Za-z0-9()']+( DEFAULT [A-Za-z0-9']+)?$)/,
        );
        // Every table reference is qualified: no FROM/TO/JOIN without {{db}}.
        for (const ref of s.matchAll(/\b(FROM|TO|(?<!ARRAY )JOIN)\s+([^\s(]+)/g)) {
          expect(ref[2]).toMatch(/^\{\{db\}\}\./);
        }
        expect(s).not.toMatch(/DateTime64|LowCardinality|\bTTL\b|\bMap\(|\{[a-z]+:[A-Za-z]/);
      }
    }
  });

  it('splits statements on ; at line ends, outside strings, without comment lines', () => {
    expect(
      splitStatements(
        "-- header\nCREATE TABLE a (x String DEFAULT 'a;\nb');\n\n-- two\nCREATE VIEW v AS SELECT 1\n",
      ),
    ).toEqual(["CREATE TABLE a (x String DEFAULT 'a;\nb')", 'CREATE VIEW v AS SELECT 1']);
  });

  it('fills in the database as a validated identifier', () => {
    expect(render('CREATE TABLE {{db}}.t', 'hf_1')).toBe('CREATE TABLE `hf_1`.t');
    expect(() => render('x', 'a`; DROP')).toThrow();
  });

  it('skips an ADD COLUMN whose column exists, so an interrupted migration can run again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mig-'));
    await writeFile(
      join(dir, '001_alter_t_v1.sql'),
      'ALTER TABLE {{db}}.t ADD COLUMN a String;\nALTER TABLE {{db}}.t ADD COLUMN b UInt32;\n',
    );
    const commands: string[] = [];
    const ch: SqlExecutor = {
      command: (s) => Promise.resolve(void commands.push(s.text)),
      // system.columns says `a` exists (added before a crash), `b` does not.
      query: <T>(s: { text: string }) =>
        Promise.resolve(
          (s.text.includes('system.columns')
            ? [{ n: s.text.includes("name = 'a'") ? '1' : '0' }]
            : []) as T[],
        ),
      insert: () => Promise.resolve(),
      insertRowBinary: () => Promise.resolve(),
      ping: () => Promise.resolve(true),
      close: () => Promise.resolve(),
    };
    const url = new URL(`${pathToFileURL(dir).href}/`);
    expect((await migrate({ ch, database: 'db', logger, dir: url })).applied).toEqual([
      '001_alter_t_v1',
    ]);
    const alters = commands.filter((c) => c.startsWith('ALTER'));
    expect(alters).toEqual(['ALTER TABLE `db`.t ADD COLUMN b UInt32']);
  });

  it('refuses to start when an applied migration changed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mig-'));
    await writeFile(
      join(dir, '001_create_t_v1.sql'),
      'CREATE TABLE IF NOT EXISTS {{db}}.t (x UInt8) ENGINE = Memory\n',
    );
    const url = new URL(`${pathToFileURL(dir).href}/`);
    const commands: string[] = [];
    const ch: SqlExecutor = {
      command: (s) => Promise.resolve(void commands.push(s.text)),
      query: <T>() =>
        Promise.resolve([{ version: 1, name: '001_create_t_v1', checksum: 'old' }] as T[]),
      insert: () => Promise.resolve(),
      insertRowBinary: () => Promise.resolve(),
      ping: () => Promise.resolve(true),
      close: () => Promise.resolve(),
    };
    await expect(migrate({ ch, database: 'db', logger, dir: url })).rejects.toThrow(MigrationError);
    expect(commands.some((c) => c.includes('.t (x'))).toBe(false);
  });

  it('waits for a ClickHouse that is still starting, but not for a broken migration', async () => {
    let refusals = 2;
    const commands: string[] = [];
    const ch: SqlExecutor = {
      command: (st) => {
        if (refusals > 0) {
          refusals--;
          return Promise.reject(
            Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
          );
        }
        commands.push(st.text);
        return Promise.resolve();
      },
      query: <T>() => Promise.resolve([] as T[]),
      insert: () => Promise.resolve(),
      insertRowBinary: () => Promise.resolve(),
      ping: () => Promise.resolve(true),
      close: () => Promise.resolve(),
    };
    const { applied } = await migrateWhenReachable({ ch, database: 'db', logger });
    expect(applied.length).toBeGreaterThanOrEqual(8);
    expect(commands.some((c) => c.includes('events_raw_v1'))).toBe(true);

    const failing = { ...ch, query: () => Promise.reject(new MigrationError('edited')) };
    await expect(migrateWhenReachable({ ch: failing, database: 'db', logger })).rejects.toThrow(
      MigrationError,
    );
  });
});
