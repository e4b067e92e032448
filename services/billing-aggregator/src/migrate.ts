import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { retry } from '@holdfast/retry';
import { BaseError, type Logger } from '@holdfast/runtime';
import type { SqlExecutor } from './clickhouse.js';
import { ident, qualified, raw, sql } from './sql.js';

/** Where the .sql files live: `migrations/` beside `src/` and `dist/`. */
const MIGRATIONS_DIR = new URL('../migrations/', import.meta.url);

/** `NNN_verb_table_vN.sql`, e.g. `001_create_events_raw_v1.sql`. */
const FILE_NAME = /^(\d{3})_(create|alter|add|drop|rename)_([a-z0-9_]+)_v(\d+)\.sql$/;

export interface Migration {
  version: number;
  name: string;
  /** sha256 of the file as written (before the database name is filled in). */
  checksum: string;
  statements: string[];
}

export class MigrationError extends BaseError<'migration_failed'> {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super({ code: 'migration_failed', message, cause: opts.cause });
  }
}

/**
 * Splits a file into statements on `;` at the end of a line, outside string literals, and
 * drops `--` comment lines. Our migrations keep to that shape.
 */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current = '';
  let inString = false;
  for (const line of text.split('\n')) {
    if (!inString && /^\s*--/.test(line)) continue;
    for (let i = 0; i < line.length; i++) {
      const ch = line[i];
      if (ch === '\\' && inString) i++;
      else if (ch === "'") inString = !inString;
    }
    current += `${line}\n`;
    if (!inString && /;\s*$/.test(line)) {
      statements.push(current.trim().replace(/;$/, ''));
      current = '';
    }
  }
  if (current.trim()) statements.push(current.trim());
  return statements.filter((s) => s.length > 0);
}

export async function loadMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const m = FILE_NAME.exec(file);
    if (!m) throw new MigrationError(`migration ${file} is not named NNN_verb_table_vN.sql`);
    const text = await readFile(new URL(file, dir), 'utf8');
    const version = Number(m[1]);
    if (migrations.some((x) => x.version === version)) {
      throw new MigrationError(`two migrations have version ${version}`);
    }
    migrations.push({
      version,
      name: file.replace(/\.sql$/, ''),
      checksum: createHash('sha256').update(text).digest('hex'),
      statements: splitStatements(text),
    });
  }
  return migrations;
}

/** A statement with `{{db}}` replaced by the validated, quoted database name. */
export function render(statement: string, database: string): string {
  return statement.replaceAll('{{db}}', ident(database).text);
}

/** `ALTER TABLE {{db}}.t ADD COLUMN c ...`: one column per statement, so it can be skipped. */
const ADD_COLUMN = /^ALTER TABLE \{\{db\}\}\.([a-z0-9_]+) ADD COLUMN ([a-z0-9_]+) /i;

/**
 * Whether a statement adds a column the table already has. 18.16 has no `ADD COLUMN IF NOT
 * EXISTS`, so this is how such a migration stays safe to run twice.
 */
async function columnExists(
  ch: SqlExecutor,
  database: string,
  statement: string,
): Promise<boolean> {
  const m = ADD_COLUMN.exec(statement);
  if (!m) return false;
  const [, table = '', column = ''] = m;
  const rows = await ch.query<{ n: string | number }>(
    sql`SELECT count() AS n FROM system.columns WHERE database = ${database} AND table = ${table} AND name = ${column}`,
  );
  return Number(rows[0]?.n ?? 0) > 0;
}

interface AppliedRow {
  version: number;
  name: string;
  checksum: string;
}

/**
 * Brings the database to the latest schema. Idempotent and safe for replicas starting at once:
 * every statement is `IF NOT EXISTS` (or an `ADD COLUMN` skipped when the column exists), so a migration that ran halfway (crash) or twice
 * (two replicas) ends the same; the record of applied migrations is a ReplacingMergeTree read
 * with FINAL. An applied migration whose file changed stops the start: write a new migration.
 */
export async function migrate(opts: {
  ch: SqlExecutor;
  database: string;
  logger: Logger;
  dir?: URL;
}): Promise<{ applied: string[] }> {
  const { ch, database, logger } = opts;
  const table = qualified(database, 'schema_migrations');
  await ch.command(sql`CREATE DATABASE IF NOT EXISTS ${ident(database)}`);
  await ch.command(
    sql`CREATE TABLE IF NOT EXISTS ${table} (version UInt32, name String, checksum String, applied_at DateTime('UTC')) ENGINE = ReplacingMergeTree ORDER BY version`,
  );
  const rows = await ch.query<AppliedRow>(
    sql`SELECT version, name, checksum FROM ${table} FINAL ORDER BY version`,
  );
  const done = new Map(rows.map((r) => [Number(r.version), r]));
  const applied: string[] = [];
  for (const m of await loadMigrations(opts.dir)) {
    const prior = done.get(m.version);
    if (prior) {
      if (prior.checksum !== m.checksum) {
        throw new MigrationError(
          `migration ${m.name} changed after it was applied (as ${prior.name}); add a new migration instead`,
        );
      }
      continue;
    }
    for (const statement of m.statements) {
      if (await columnExists(ch, database, statement)) continue;
      await ch.command(raw(render(statement, database)));
    }
    await ch.command(
      sql`INSERT INTO ${table} (version, name, checksum, applied_at) VALUES (${m.version}, ${m.name}, ${m.checksum}, now())`,
    );
    logger.info({ migration: m.name, database }, 'migration applied');
    applied.push(m.name);
  }
  return { applied };
}

/**
 * `migrate`, retried while ClickHouse is not reachable yet (a stack starting up), with backoff
 * up to `timeoutMs`. A MigrationError (an edited migration, a bad file) fails at once.
 */
export async function migrateWhenReachable(
  opts: Parameters<typeof migrate>[0] & { timeoutMs?: number },
): Promise<{ applied: string[] }> {
  return retry(() => migrate(opts), {
    policy: { initialMs: 250, maxMs: 5_000, retryForMs: opts.timeoutMs ?? 120_000 },
    retryable: (err) => !(err instanceof MigrationError),
    onRetry: ({ delayMs, outcome }) => {
      const err = outcome.ok ? undefined : outcome.error;
      opts.logger.warn({ err, delayMs }, 'ClickHouse not ready for migrations: retrying');
    },
  });
}
