import { connectNats, createLogger } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import OpenAI from 'openai';
import { afterEach, expect, test } from 'vitest';
import { startStackProcess, type StackProcess } from './stack-process.js';

let stack: StackProcess | undefined;
afterEach(async () => {
  await stack?.cleanup();
  stack = undefined;
});

test('pnpm stack --cluster: a 3-node NATS cluster, every service on all three servers, every stream and bucket at R3', async () => {
  stack = await startStackProcess({
    HOLDFAST_STACK_CLUSTER: 'true',
    HOLDFAST_STACK_FREE_PORTS: 'true',
  });
  const { state, lines } = stack;
  const names = state.processes.map((p) => p.name);
  expect(names).toEqual(expect.arrayContaining(['nats-1', 'nats-2', 'nats-3', 'edge']));
  expect(names).not.toContain('nats');
  const servers = state.urls.nats.split(',');
  expect(servers).toHaveLength(3);
  expect(lines.some((l) => l.includes('3-node JetStream cluster, streams at R3'))).toBe(true);

  const openai = new OpenAI({
    baseURL: `${state.urls.edge}/v1`,
    apiKey: 'sk-hf-demo-support-bot',
    maxRetries: 0,
  });
  const done = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Hello' }],
  });
  expect(done.choices[0]?.message.content).toBeTruthy();

  const nc = await connectNats({
    servers,
    name: 'stack-cluster-test',
    logger: createLogger({ name: 'stack-cluster-test', level: 'silent' }),
  });
  try {
    const jsm = await jetstreamManager(nc);
    const streams = await waitFor(
      async () => {
        const all = [];
        for await (const s of jsm.streams.list()) all.push(s);
        // events, dead letters, closes, webhook queue and log, the alerter's KV
        return all.length >= 6 ? all : undefined;
      },
      { what: 'the streams of every service' },
    );
    expect(streams.map((s) => [s.config.name, s.config.num_replicas])).toEqual(
      streams.map((s) => [s.config.name, 3]),
    );
    const events = streams.find((s) => s.config.name === 'HOLDFAST_EVENTS');
    expect(events?.cluster?.replicas?.length).toBe(2);
  } finally {
    await nc.close();
  }
});
