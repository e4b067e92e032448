import { DeliverPolicy, jetstream, type Consumer, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { CliError } from '../client.js';
import { context, parse, type Io } from '../context.js';
import { eventLine } from '../events-format.js';
import { eventsPlan, type EventsPlan } from '../events-plan.js';
import { EXIT } from '../exit.js';
import { connectTo } from '../nats-target.js';

const POLICY = {
  new: DeliverPolicy.New,
  all: DeliverPolicy.All,
  by_start_sequence: DeliverPolicy.StartSequence,
  by_start_time: DeliverPolicy.StartTime,
} as const;

async function open(plan: EventsPlan, nc: NatsConnection): Promise<Consumer> {
  const { deliver_policy, ...at } = plan.start;
  try {
    // An ordered consumer: ephemeral, in stream order, nothing to ack or clean up.
    return await jetstream(nc).consumers.get(plan.stream, {
      filter_subjects: plan.subject,
      deliver_policy: POLICY[deliver_policy],
      ...at,
    });
  } catch (err) {
    throw new CliError(
      `cannot read stream ${plan.stream} on ${plan.servers.join(',')} (${(err as Error).message}): is the stack running, and are HOLDFAST_EVENTS_STREAM / NATS_URL right?`,
      EXIT.unavailable,
    );
  }
}

/**
 * `holdfast events`: the events on JetStream (HOLDFAST_EVENTS, `holdfast.events.<tenant>.<type>`)
 * as readable lines or JSON lines, filtered by tenant and type, from now, a time or a sequence;
 * it follows until Ctrl-C, or with --no-follow stops at the end of the stream.
 */
export async function events(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {
    tenant: { type: 'string' },
    type: { type: 'string', multiple: true },
    since: { type: 'string' },
    seq: { type: 'string' },
    all: { type: 'boolean' },
    'no-follow': { type: 'boolean' },
    count: { type: 'string' },
    nats: { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new CliError(`unexpected argument "${positionals[0]}"`, EXIT.usage);
  }
  const ctx = context(io, values);
  const plan = eventsPlan(values, io.env, ctx.stack, Date.now());
  const nc = await connectTo(plan.servers, 'holdfast-events');
  let printed = 0;
  const show = (m: JsMsg): boolean => {
    let raw: Record<string, unknown>;
    try {
      raw = m.json<Record<string, unknown>>();
    } catch {
      io.stderr(`#${m.seq} ${m.subject}: not JSON, skipped\n`);
      return true;
    }
    if (plan.types && !plan.types(String(raw.type))) return true;
    io.stdout(
      plan.json
        ? `${JSON.stringify({ seq: m.seq, subject: m.subject, event: raw })}\n`
        : `${eventLine(m.seq, raw)}\n`,
    );
    printed++;
    return plan.count === undefined || printed < plan.count;
  };
  try {
    const consumer = await open(plan, nc);
    if (!plan.follow) {
      // To the end of what is stored now: no message within a second, or none pending after it.
      for (;;) {
        const m = await consumer.next({ expires: 1_000 });
        if (!m || !show(m) || m.info.pending === 0) break;
      }
      return EXIT.ok;
    }
    const messages = await consumer.consume();
    io.onInterrupt?.(() => messages.stop());
    for await (const m of messages) {
      if (!show(m)) break;
    }
    return EXIT.ok;
  } finally {
    await nc.close();
  }
}
