import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import { testClickHouse } from '../test/harness.js';
import { runRowBinaryContract, runSchemaContract } from '../test/schema-contract.js';
import { sql } from './sql.js';

test('schema on the Debian ClickHouse (18.16): migrations re-apply, views answer, a re-inserted batch counts once, hostile strings round-trip', async ({
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse; // the fixture creates iso.database and drops it afterwards
  const ch = testClickHouse(clickhouseUrl);
  try {
    const [row] = await ch.query<{ v: string }>(sql`SELECT version() AS v`);
    expect(row?.v).toBeDefined();
    await runSchemaContract(ch, iso.database);
  } finally {
    await ch.close();
  }
});

test('RowBinary inserts store what JSONEachRow stores on ClickHouse 18.16', async ({
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse;
  const ch = testClickHouse(clickhouseUrl);
  try {
    await runRowBinaryContract(ch, iso.database);
  } finally {
    await ch.close();
  }
});
