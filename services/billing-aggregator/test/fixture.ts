import { infraTest } from '@holdfast/testkit';
import type { NatsNames } from '@holdfast/events';
import type { SqlExecutor } from '../src/clickhouse.js';
import { testClickHouse } from './harness.js';

export interface AggregatorInfra {
  natsUrl: string;
  clickhouseUrl: string;
  names: NatsNames;
  /** The test's own database (created by the clickhouse fixture, dropped after the test). */
  database: string;
}

/** infraTest plus the aggregator's view of it: `infra` for its env, `ch` to read ClickHouse. */
export const aggregatorTest = infraTest.extend<{ infra: AggregatorInfra; ch: SqlExecutor }>({
  infra: async ({ natsUrl, clickhouseUrl, clickhouse, iso }, use) => {
    void clickhouse; // creates iso.database and drops it afterwards
    await use({ natsUrl, clickhouseUrl, names: iso.names, database: iso.database });
  },
  ch: async ({ clickhouseUrl }, use) => {
    const ch = testClickHouse(clickhouseUrl);
    await use(ch);
    await ch.close();
  },
});
