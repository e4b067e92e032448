import {
  infraTest as test,
  readyPort,
  startRestartableClickHouseServer,
  startService,
  waitFor,
  serverBinary,
} from '@holdfast/testkit';
import { expect } from 'vitest';
import { publishEvents } from '../test/events.js';
import {
  aggregatorEnv,
  callsBilling,
  countEvents,
  MAIN_JS,
  testClickHouse,
  viewTokens,
} from '../test/harness.js';

const OUTAGE_MS = 60_000;

test(
  'ClickHouse down for 60 s under load: events wait in JetStream, then land, 0 lost',
  { timeout: 240_000 },
  async ({ nc, natsUrl, iso }) => {
    const bin = serverBinary('clickhouse');
    // ClickHouse keeps the ports it was started on: the aggregator holds its URL through the
    // outage, so a restart on another port would not be the same server coming back (restart()
    // retries binding the same port instead, see startRestartableClickHouseServer).
    const server = await startRestartableClickHouseServer(bin);
    const ch = testClickHouse(server.url);
    const infra = { natsUrl, clickhouseUrl: server.url, names: iso.names, database: iso.database };
    const service = await startService(
      MAIN_JS,
      aggregatorEnv(infra, {
        BILLING_AGGREGATOR_BATCH_SIZE: '500',
        BILLING_AGGREGATOR_FETCH_SIZE: '250',
        BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '500',
      }),
    );
    try {
      // The ops server binds port 0 (aggregatorEnv) and logs the port it got when ready.
      const opsPort = readyPort(service, 'opsPort');
      const ready = async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).status;
      let expectedEvents = 0;
      let expectedTokens = 0;
      const publish = async (calls: number, tenant: string) => {
        const batch = callsBilling(calls, tenant);
        await publishEvents(nc, iso.names, batch.events);
        expectedEvents += batch.events.length;
        expectedTokens += batch.billed;
      };
      await publish(500, 'before');
      await waitFor(async () => (await countEvents(ch, iso.database)) === expectedEvents, {
        what: 'events before the outage',
      });

      await server.halt();
      await waitFor(async () => (await ready()) === 503, {
        what: '/readyz to report ClickHouse down',
      });
      // Load during the outage: 100 calls every 500 ms (pacing of the load, not a wait).
      const until = Date.now() + OUTAGE_MS;
      let round = 0;
      while (Date.now() < until) {
        await publish(100, `during-${round++ % 4}`);
        await new Promise((r) => setTimeout(r, 500));
      }
      expect(service.child.exitCode).toBeNull();
      await server.restart();

      await publish(500, 'after');
      await waitFor(async () => (await countEvents(ch, iso.database)) === expectedEvents, {
        timeoutMs: 60_000,
        what: `all ${expectedEvents} events after the outage`,
      });
      expect(await viewTokens(ch, iso.database)).toBe(expectedTokens);
      await waitFor(async () => (await ready()) === 200, { what: '/readyz back to ready' });
      await waitFor(() => service.lines.some((l) => l.includes('ClickHouse answers again')), {
        timeoutMs: 5_000,
        what: 'the line saying ClickHouse answers again',
      });
    } finally {
      await service.stop();
      await ch.close();
      await server.stop();
    }
  },
);
