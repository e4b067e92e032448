import { Readable } from 'node:stream';
import { createClient, type ClickHouseClient, ClickHouseLogLevel } from '@clickhouse/client';
import { ident, type Sql } from './sql.js';

/**
 * What the aggregator needs from ClickHouse. The HTTP client implements it in production;
 * tests also run the same migrations and queries through chdb (current ClickHouse in-process).
 */
export interface SqlExecutor {
  /** A statement without a result (DDL, INSERT ... VALUES). */
  command(statement: Sql): Promise<void>;
  /** A SELECT; rows as JSON objects (UInt64/Int64 come back as strings). */
  query<T = Record<string, unknown>>(statement: Sql): Promise<T[]>;
  /** Inserts rows as JSONEachRow into `table` (a validated, qualified name). */
  insert(table: Sql, rows: readonly Record<string, unknown>[]): Promise<void>;
  /**
   * Inserts a RowBinary body into `table`; `columns` (validated identifiers) name what each
   * row carries, in order. The aggregator's hot path (see rowbinary.ts).
   */
  insertRowBinary(table: Sql, columns: readonly string[], body: Uint8Array): Promise<void>;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface ClickHouseOptions {
  url: string;
  username: string;
  password: string;
  /** Per request. An insert of a full batch takes well under a second on loopback. */
  requestTimeoutMs?: number;
  /** Silence the client's own error logging (tests; we log failures ourselves). */
  quiet?: boolean;
}

/** The HTTP client as a SqlExecutor. No default database: every name is qualified. */
export function createClickHouse(opts: ClickHouseOptions): SqlExecutor & {
  client: ClickHouseClient;
} {
  const client = createClient({
    url: opts.url,
    username: opts.username,
    password: opts.password,
    request_timeout: opts.requestTimeoutMs ?? 30_000,
    log: { level: opts.quiet ? ClickHouseLogLevel.OFF : ClickHouseLogLevel.WARN },
    // Keep-alive sockets idle for less than the server's 3 s keep-alive timeout (measured here).
    keep_alive: { enabled: true, idle_socket_ttl: 2_500 },
  });
  return {
    client,
    async command(statement) {
      await client.command({ query: statement.text });
    },
    async query<T>(statement: Sql) {
      const rs = await client.query({ query: statement.text, format: 'JSONEachRow' });
      return rs.json<T>();
    },
    async insert(table, rows) {
      await client.insert({
        table: table.text,
        values: rows as Record<string, unknown>[],
        format: 'JSONEachRow',
      });
    },
    async insertRowBinary(table, columns, body) {
      const { stream } = await client.exec({
        query: `INSERT INTO ${table.text} (${columns.map((c) => ident(c).text).join(', ')}) FORMAT RowBinary`,
        values: Readable.from([body], { objectMode: false }),
      });
      // The answer is empty; reading it to the end returns the socket to the pool.
      for await (const _ of stream) void _;
    },
    async ping() {
      const r = await client.ping();
      return r.success;
    },
    close: () => client.close(),
  };
}
