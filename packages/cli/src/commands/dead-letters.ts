import { deadLetterStream, DEFAULT_NAMES } from '@holdfast/events';
import { readDeadLetters, type StoredDeadLetter } from '@holdfast/runtime';
import { jetstreamManager } from '@nats-io/jetstream';
import { CliError } from '../client.js';
import { context, parse, type Io } from '../context.js';
import { EXIT } from '../exit.js';
import { connectTo, natsTarget } from '../nats-target.js';

/** Who parked it: the last token of a dead letter's subject (a durable's name, outbox-relay, ...). */
const SOURCE = /^[A-Za-z0-9_-]{1,64}$/;

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

/**
 * `holdfast dead-letters`: the newest messages every service parked in the one dead-letter
 * stream (`<events stream>_DEADLETTER`), oldest first: why, by whom, where from, the body.
 */
export async function deadLetters(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {
    last: { type: 'string', default: '20' },
    source: { type: 'string' },
    nats: { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new CliError(`unexpected argument "${positionals[0]}"`, EXIT.usage);
  }
  if (!/^[1-9]\d{0,5}$/.test(values.last)) {
    throw new CliError('--last must be a number of dead letters (1 to 999999)', EXIT.usage);
  }
  if (values.source !== undefined && !SOURCE.test(values.source)) {
    throw new CliError(
      `--source ${values.source}: a source's name, e.g. billing-aggregator, alerter, alerter-webhooks, authority-closes, outbox-relay`,
      EXIT.usage,
    );
  }
  const ctx = context(io, values);
  const target = natsTarget(values.nats, io.env, ctx.stack);
  const stream = deadLetterStream({ ...DEFAULT_NAMES, eventsStream: target.stream }).name;
  const nc = await connectTo(target.servers, 'holdfast-dead-letters');
  try {
    const letters = await readDeadLetters(await jetstreamManager(nc), stream, {
      last: Number(values.last),
      source: values.source,
    }).catch((err: unknown) => {
      throw new CliError(
        `cannot read stream ${stream} on ${target.servers.join(',')} (${(err as Error).message}): is the stack running, and are HOLDFAST_EVENTS_STREAM / NATS_URL right?`,
        EXIT.unavailable,
      );
    });
    for (const l of letters) {
      io.stdout(
        values.json
          ? `${JSON.stringify({ ...l, data: new TextDecoder().decode(l.data) })}\n`
          : `${describe(l)}\n`,
      );
    }
    if (!values.json) io.stdout(`${letters.length} dead letter(s) shown from ${stream}\n`);
    return EXIT.ok;
  } finally {
    await nc.close();
  }
}
