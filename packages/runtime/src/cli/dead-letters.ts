#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { DEFAULT_NAMES, deadLetterStream } from '@holdfast/events';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { z } from 'zod';
import { sharedEnv } from '../env.js';
import { readDeadLetters, type StoredDeadLetter } from '../jetstream/read-dead-letters.js';

const USAGE = `Usage: pnpm --filter @holdfast/runtime dead-letters [--last N] [--source NAME] [--json]

Prints the newest dead letters of every Holdfast service (the stream <events stream>_DEADLETTER,
HOLDFAST_EVENTS_DEADLETTER by default), oldest first: why each was parked, by whom, where it
came from and its first bytes.

  --last N        how many (default 20)
  --source NAME   only those of one source: billing-aggregator, alerter, alerter-webhooks, outbox-relay
  --json          one JSON object a line, with the whole body

Connects to NATS_URL (one server or several, comma-separated); the stream follows HOLDFAST_EVENTS_STREAM.`;

/** The services' own NATS_URL and events stream; the dead letters are in `<it>_DEADLETTER`. */
const Env = z.object({
  NATS_URL: sharedEnv.NATS_URL,
  HOLDFAST_EVENTS_STREAM: sharedEnv.HOLDFAST_EVENTS_STREAM,
});

function describe(l: StoredDeadLetter): string {
  const body = new TextDecoder().decode(l.data);
  const origin = l.outboxEntry
    ? `outbox entry ${l.outboxEntry}`
    : `${l.stream ?? '?'} #${l.streamSeq ?? '?'} (delivery ${l.deliveryCount ?? '?'})`;
  return [
    `#${l.seq} ${l.time} ${l.deadLetterSubject}`,
    `  reason:  ${l.reason}`,
    `  from:    ${l.service}, ${origin}`,
    `  subject: ${l.subject ?? '-'}`,
    `  body:    ${body.length > 200 ? `${body.slice(0, 200)}...` : body}`,
  ].join('\n');
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      last: { type: 'string', default: '20' },
      source: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  const last = Number(values.last);
  if (values.help || !Number.isInteger(last) || last < 1) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  const env = Env.parse(process.env);
  const stream = deadLetterStream({ ...DEFAULT_NAMES, eventsStream: env.HOLDFAST_EVENTS_STREAM });
  const nc = await connect({ servers: env.NATS_URL, name: 'holdfast-dead-letters' });
  try {
    const letters = await readDeadLetters(await jetstreamManager(nc), stream.name, {
      last,
      source: values.source,
    });
    for (const l of letters) {
      console.log(
        values.json
          ? JSON.stringify({ ...l, data: new TextDecoder().decode(l.data) })
          : describe(l),
      );
    }
    if (!values.json) console.log(`${letters.length} dead letter(s) shown from ${stream.name}`);
    return 0;
  } finally {
    await nc.close();
  }
}

process.exitCode = await main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  return 2;
});
