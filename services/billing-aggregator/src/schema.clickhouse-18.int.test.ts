import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import { runAudioContract } from '../test/audio-contract.js';
import { runTierContract } from '../test/tier-contract.js';
import { runToolFeeContract } from '../test/tool-fee-contract.js';
import { runWindowChargeContract } from '../test/window-charge-contract.js';
import { runChargedViewsContract } from '../test/charged-contract.js';
import { runLevelsContract } from '../test/levels-contract.js';
import { testClickHouse } from '../test/harness.js';
import {
  runRowBinaryContract,
  runSchemaContract,
  runViewsUpgradeContract,
} from '../test/schema-contract.js';
import type { SqlExecutor } from './clickhouse.js';
import { sql } from './sql.js';

const contracts: Array<[string, (ch: SqlExecutor, database: string) => Promise<void>]> = [
  [
    'schema on the Debian ClickHouse (18.16): migrations re-apply, views answer, a re-inserted batch counts once, hostile strings round-trip',
    async (ch, database) => {
      const [row] = await ch.query<{ v: string }>(sql`SELECT version() AS v`);
      expect(row?.v).toBeDefined();
      await runSchemaContract(ch, database);
    },
  ],
  ['RowBinary inserts store what JSONEachRow stores on ClickHouse 18.16', runRowBinaryContract],
  [
    'the upgrade to the decisions and window-state views (009) keeps every row on ClickHouse 18.16',
    runViewsUpgradeContract,
  ],
  [
    'usage views sum what windows were charged, refusals their count, overruns their excess (010) on ClickHouse 18.16',
    runChargedViewsContract,
  ],
  [
    'the end user and upstream columns, key and end-user window rows, capacity per upstream (013, 014) on ClickHouse 18.16',
    runLevelsContract,
  ],
  ['the audio token columns (015) on ClickHouse 18.16', runAudioContract],
  ['the service tier (016) and long context (017) columns on ClickHouse 18.16', runTierContract],
  ['the tool fee columns (018) on ClickHouse 18.16', runToolFeeContract],
  [
    'what each window was charged (019), window_states_v2 too (020), windows closes list as removed (021, 022), on ClickHouse 18.16',
    runWindowChargeContract,
  ],
];

for (const [name, run] of contracts) {
  test(name, async ({ clickhouseUrl, clickhouse, iso }) => {
    void clickhouse; // the fixture creates iso.database and drops it afterwards
    const ch = testClickHouse(clickhouseUrl);
    try {
      await run(ch, iso.database);
    } finally {
      await ch.close();
    }
  });
}
