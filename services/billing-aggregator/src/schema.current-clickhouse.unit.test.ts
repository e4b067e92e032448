import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAudioContract } from '../test/audio-contract.js';
import { runTierContract } from '../test/tier-contract.js';
import { runToolFeeContract } from '../test/tool-fee-contract.js';
import { runWindowChargeContract } from '../test/window-charge-contract.js';
import { runChargedViewsContract } from '../test/charged-contract.js';
import { runLevelsContract } from '../test/levels-contract.js';
import { chdbExecutor } from '../test/chdb.js';
import {
  runRowBinaryContract,
  runSchemaContract,
  runViewsUpgradeContract,
} from '../test/schema-contract.js';
import type { SqlExecutor } from './clickhouse.js';
import { sql } from './sql.js';

describe('schema on current ClickHouse (chdb)', { timeout: 60_000 }, () => {
  let ch: SqlExecutor;
  beforeAll(async () => {
    ch = await chdbExecutor();
  });
  afterAll(() => ch.close());

  it('runs on a current server', async () => {
    const [row] = await ch.query<{ v: string }>(sql`SELECT version() AS v`);
    expect(Number(row?.v.split('.')[0])).toBeGreaterThanOrEqual(24);
  });

  it('applies every migration idempotently, every view answers, a re-inserted batch counts once, hostile strings round-trip', async () => {
    await runSchemaContract(ch, 'holdfast');
  });

  it('upgrades to the decisions and window-state views (009) with the same rows as the tables before', async () => {
    await runViewsUpgradeContract(ch, 'upgrade');
  });

  it('sums what windows were charged, refusals by count, overruns by excess (010)', async () => {
    await runChargedViewsContract(ch, 'charged');
  });

  it('keeps the end user and upstream, one window row per key and end user, capacity per upstream (013, 014)', async () => {
    await runLevelsContract(ch, 'levels');
  });

  it('keeps the audio token columns (015)', async () => {
    await runAudioContract(ch, 'audio');
  });

  it('keeps the service tier (016) and long context (017) columns', async () => {
    await runTierContract(ch, 'tiers');
  });

  it('keeps the tool fee columns (018)', async () => {
    await runToolFeeContract(ch, 'tool_fees');
  });

  it('keeps what each window was charged (019), window_states_v2 too (020), windows closes list as removed (021, 022)', async () => {
    await runWindowChargeContract(ch, 'window_charges');
  });

  it('stores from a RowBinary insert what it stores from JSONEachRow', async () => {
    await runRowBinaryContract(ch, 'rowbinary');
  });
});
