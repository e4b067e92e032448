import { startClickHouseServer, type LocalServer, serverBinary } from '@holdfast/testkit/infra';

/**
 * The ClickHouse a bench reads: CLICKHOUSE_URL when set, else a local clickhouse-server on a
 * free port (`server`, to stop at the end).
 */
export async function benchClickHouse(): Promise<{ url: string; server?: LocalServer }> {
  const url = process.env.CLICKHOUSE_URL;
  if (url) return { url };
  const bin = serverBinary('clickhouse');
  const server = await startClickHouseServer(bin);
  return { url: server.url, server };
}
