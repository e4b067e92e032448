import { didYouMean } from '@holdfast/config';
import { EVENT_TYPES, TenantId } from '@holdfast/events';
import { CliError } from './client.js';
import type { LocalStack } from './context.js';
import { EXIT } from './exit.js';
import { natsTarget } from './nats-target.js';

/** Where `holdfast events` reads and what it asks the stream for. */
export interface EventsPlan {
  servers: string[];
  stream: string;
  /** One filter subject (nats-server 2.9 takes one): `<prefix>.<tenant|*>.<type|'>'>`. */
  subject: string;
  /** Several --type values: filtered here, on the type after the tenant. */
  types: ((type: string) => boolean) | undefined;
  start:
    | { deliver_policy: 'new' }
    | { deliver_policy: 'all' }
    | { deliver_policy: 'by_start_sequence'; opt_start_seq: number }
    | { deliver_policy: 'by_start_time'; opt_start_time: string };
  follow: boolean;
  json: boolean;
  count: number | undefined;
}

export interface EventsOptions {
  tenant?: string;
  type?: string[];
  since?: string;
  seq?: string;
  all?: boolean;
  'no-follow'?: boolean;
  count?: string;
  nats?: string;
  json?: boolean;
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `10m`, `2h`, `1d`, `30s` before now, or an ISO time. */
export function sinceTime(text: string, now: number): string {
  const ago = /^(\d+)([smhd])$/.exec(text);
  if (ago) return new Date(now - Number(ago[1]) * UNITS[ago[2]!]!).toISOString();
  const at = Date.parse(text);
  if (Number.isNaN(at)) {
    throw new CliError(
      `--since ${text}: give a time (2026-12-01T10:00:00Z) or an age (30s, 10m, 2h, 1d)`,
      EXIT.usage,
    );
  }
  return new Date(at).toISOString();
}

function checkType(type: string): string {
  if ((EVENT_TYPES as readonly string[]).includes(type)) return type;
  // `reservation.*`: every type of a family.
  if (/^[a-z_]+\.\*$/.test(type) && EVENT_TYPES.some((t) => t.startsWith(type.slice(0, -1)))) {
    return type;
  }
  const guess = didYouMean(type, EVENT_TYPES);
  throw new CliError(
    `--type ${type}: unknown event type${guess ? ` (did you mean ${guess}?)` : `; one of ${EVENT_TYPES.join(', ')}`}`,
    EXIT.usage,
  );
}

const matches = (pattern: string) => (type: string) =>
  pattern.endsWith('.*') ? type.startsWith(pattern.slice(0, -1)) : type === pattern;

/**
 * The plan from the options: NATS and the stream as natsTarget finds them. Without a start,
 * following shows new events and --no-follow everything stored.
 */
export function eventsPlan(
  o: EventsOptions,
  env: NodeJS.ProcessEnv,
  stack: LocalStack,
  now: number,
): EventsPlan {
  const target = natsTarget(o.nats, env, stack);
  if (o.tenant !== undefined && !TenantId.safeParse(o.tenant).success) {
    throw new CliError(
      `--tenant ${o.tenant}: not a tenant id ([a-z0-9][a-z0-9_-]{0,63})`,
      EXIT.usage,
    );
  }
  const types = (o.type ?? [])
    .flatMap((t) => t.split(','))
    .filter(Boolean)
    .map(checkType);
  const starts = [o.since, o.seq, o.all ? 'all' : undefined].filter((x) => x !== undefined);
  if (starts.length > 1) throw new CliError('give one of --since, --seq and --all', EXIT.usage);
  const follow = o['no-follow'] !== true;
  let start: EventsPlan['start'] = { deliver_policy: follow ? 'new' : 'all' };
  if (o.all) start = { deliver_policy: 'all' };
  if (o.since !== undefined) {
    start = { deliver_policy: 'by_start_time', opt_start_time: sinceTime(o.since, now) };
  }
  if (o.seq !== undefined) {
    if (!/^[1-9]\d*$/.test(o.seq))
      throw new CliError('--seq must be a stream sequence (1, 2, ...)', EXIT.usage);
    start = { deliver_policy: 'by_start_sequence', opt_start_seq: Number(o.seq) };
  }
  if (o.count !== undefined && !/^[1-9]\d*$/.test(o.count)) {
    throw new CliError('--count must be a number of events', EXIT.usage);
  }
  const one = types.length === 1 ? types[0]! : '>';
  return {
    servers: target.servers,
    stream: target.stream,
    subject: `${target.prefix}.${o.tenant ?? '*'}.${one}`,
    types: types.length > 1 ? (t) => types.some((p) => matches(p)(t)) : undefined,
    start,
    follow,
    json: o.json === true,
    count: o.count === undefined ? undefined : Number(o.count),
  };
}
