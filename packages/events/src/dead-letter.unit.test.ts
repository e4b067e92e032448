import { expect, test } from 'vitest';
import { DEAD_LETTER_HEADERS, deadLetterHeaders, readDeadLetterHeaders } from './dead-letter.js';

test('a dead letter header set reads back as written, the reason on one line and bounded', () => {
  const pairs = deadLetterHeaders({
    reason: `line one\r\nline two ${'x'.repeat(2_000)}`,
    service: 'billing-aggregator',
    subject: 'holdfast.events.team.reservation.settled',
    stream: 'HOLDFAST_EVENTS',
    streamSeq: 42,
    deliveryCount: 3,
  });
  const map = new Map(pairs);
  expect(map.get(DEAD_LETTER_HEADERS.reason)).toMatch(/^line one line two x+$/);
  expect(map.get(DEAD_LETTER_HEADERS.reason)).toHaveLength(1_000);
  expect(map.has(DEAD_LETTER_HEADERS.outboxEntry)).toBe(false);
  const info = readDeadLetterHeaders((name) => map.get(name) ?? '');
  expect(info).toMatchObject({
    service: 'billing-aggregator',
    subject: 'holdfast.events.team.reservation.settled',
    stream: 'HOLDFAST_EVENTS',
    streamSeq: 42,
    deliveryCount: 3,
    outboxEntry: undefined,
  });
});
