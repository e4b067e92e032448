import { toJsMsg } from '@nats-io/jetstream/internal';
import type { Msg } from '@nats-io/transport-node';
import { expect, test } from 'vitest';
import { streamSequence } from './messages.js';

/** A delivery as the library builds it, with only its reply subject set. */
function delivery(reply: string) {
  return toJsMsg({ reply } as Msg);
}

function randomInt(max: number): number {
  return Math.floor(Math.random() * max);
}

/** Reply subjects of both layouts nats-server uses, with sequences up to 2^53. */
function replies(): string[] {
  const out: string[] = [];
  const big = [0, 1, 9, 10, 4_294_967_295, 4_294_967_296, Number.MAX_SAFE_INTEGER];
  for (let i = 0; i < 2_000; i++) {
    const seq = i < big.length ? big[i]! : randomInt(i % 2 ? 1e6 : Number.MAX_SAFE_INTEGER);
    const tail = `${1 + randomInt(5)}.${seq}.${randomInt(1e9)}.${Date.now()}${randomInt(1e6)}.${randomInt(1e4)}`;
    out.push(`$JS.ACK.hf-events.billing-aggregator.${tail}`);
    out.push(`$JS.ACK._.ACCHASH${i}.hf-events.billing-aggregator.${tail}.r${i}`);
    out.push(`$JS.ACK.domain-${i}.ACCHASH.stream_${i}.consumer-${i}.${tail}.RND`);
    out.push(`$JS.ACK.hf-events.billing-aggregator.${tail}`.replace(`.${seq}.`, '.0042.'));
  }
  return out;
}

test('the stream sequence read from the reply subject is the one the library parses, in both layouts', () => {
  for (const reply of replies()) {
    expect(streamSequence(delivery(reply)), reply).toBe(delivery(reply).seq);
  }
});

test('a reply subject that is no JetStream delivery throws as the library does', () => {
  for (const reply of [
    '',
    '_INBOX.abc.def',
    '$JS.ACK.a.b.c',
    '$JS.NAK.a.b.1.2.3.4.5',
    'x.ACK.a.b.1.2.3.4.5',
  ]) {
    expect(() => delivery(reply).seq).toThrow();
    expect(() => streamSequence(delivery(reply)), reply).toThrow();
  }
});

test('reading the stream sequence leaves the delivery info unparsed', () => {
  const msg = delivery('$JS.ACK.hf-events.billing-aggregator.1.77.3.1733556000123456789.0');
  expect(streamSequence(msg)).toBe(77);
  expect((msg as unknown as { di?: unknown }).di).toBeUndefined();
});
