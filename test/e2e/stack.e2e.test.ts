import { isAlive, PROCESS_ORDER } from '@holdfast/stack';
import { waitFor } from '@holdfast/testkit';
import OpenAI from 'openai';
import { afterEach, expect, test } from 'vitest';
import { startStackProcess, type StackProcess } from './stack-process.js';

let stack: StackProcess | undefined;
afterEach(async () => {
  await stack?.cleanup();
  stack = undefined;
});

/**
 * One read, on a connection closed after it: clickhouse-server's stop waits for the connections
 * still open (up to `shutdown_wait_unfinished`, 5 s), an idle keep-alive one too.
 */
async function clickhouse(url: string, query: string): Promise<string> {
  const res = await fetch(`${url}/?query=${encodeURIComponent(query)}`, {
    headers: { connection: 'close' },
  });
  if (!res.ok) throw new Error(`${res.status}: ${await res.text()}`);
  return (await res.text()).trim();
}

test('pnpm stack: starts NATS, Redis, ClickHouse and every service, serves a call whose event reaches ClickHouse, and Ctrl-C stops every process', async () => {
  stack = await startStackProcess();
  const { state, lines } = stack;
  expect(state.processes.map((p) => p.name)).toEqual(PROCESS_ORDER);
  // Logs are prefixed per process; the summary names the demo keys.
  // Services write their lines in blocks (at most 200 ms late).
  await waitFor(
    () => lines.some((l) => l.startsWith('edge          | ') && l.includes(' ready ')),
    {
      timeoutMs: 5_000,
      what: "the edge's ready line",
    },
  );
  expect(lines).toContain('  sk-hf-demo-support-bot          support-bot');

  const openai = new OpenAI({
    baseURL: `${state.urls.edge}/v1`,
    apiKey: 'sk-hf-demo-support-bot',
    maxRetries: 0,
  });
  const { data, response } = await openai.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] })
    .withResponse();
  expect(data.choices[0]?.message.content).toBeTruthy();
  const reservation = response.headers.get('x-holdfast-reservation-id');
  expect(reservation).toMatch(/^[0-9a-f-]{36}$/);

  // The settled event is in ClickHouse within 10 s (the aggregator flushes every 5 s).
  const settled = `SELECT count() FROM ${state.clickhouseDatabase}.events_raw_v1 FINAL WHERE reservation_id = '${reservation}' AND type = 'reservation.settled'`;
  await waitFor(async () => (await clickhouse(state.urls.clickhouse, settled)) === '1', {
    timeoutMs: 10_000,
    intervalMs: 250,
    what: 'the settled event in ClickHouse',
  });

  const interruptedAt = performance.now();
  expect(await stack.interrupt()).toBe(0);
  // As by hand (0.5-1 s): nothing the test left open holds a process up (it was 8.1 s, the
  // 5 s of clickhouse-server waiting for the test's idle keep-alive connection).
  expect(performance.now() - interruptedAt).toBeLessThan(5_000);
  for (const p of state.processes)
    expect({ name: p.name, alive: isAlive(p.pid) }).toEqual({ name: p.name, alive: false });
  // Stopped last started first: the edge before the authority before NATS.
  const order = lines.flatMap((l) => /^stack +\| (\S+) exited \(/.exec(l)?.[1] ?? []);
  expect(order).toEqual([...state.processes.map((p) => p.name)].reverse());
});
