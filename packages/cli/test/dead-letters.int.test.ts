import { createLogger, DeadLetters, ensureEventsStream } from '@holdfast/runtime';
import { infraTest as test } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { holdfast } from './stack.js';

test('holdfast dead-letters shows an operator every parked message: reason, service, origin, body', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await ensureEventsStream(await jetstreamManager(nc), iso.names);
  const letters = (source: string) =>
    new DeadLetters({
      nc,
      names: iso.names,
      service: 'budget-authority',
      source,
      logger: createLogger({ name: 'test', level: 'silent' }),
    });
  await letters('outbox-relay').publish(
    '{"id":"not-a-uuid"}',
    { reason: 'id: invalid uuid', outboxEntry: 'hf:{acme}:outbox 1-0' },
    'outbox.1-0',
  );
  await letters('alerter').publish('x', { reason: 'other' }, 'other.1');
  const env = { NATS_URL: natsUrl, HOLDFAST_EVENTS_STREAM: iso.names.eventsStream };

  const human = await holdfast(['dead-letters'], env);
  expect(human).toMatchObject({ code: 0, stderr: '' });
  expect(human.stdout).toContain('reason:  id: invalid uuid');
  expect(human.stdout).toContain('from:    budget-authority, outbox entry hf:{acme}:outbox 1-0');
  expect(human.stdout).toContain('2 dead letter(s) shown');

  const json = await holdfast(['dead-letters', '--json', '--source', 'outbox-relay'], env);
  const lines = json.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(JSON.parse(lines[0]!)).toMatchObject({
    reason: 'id: invalid uuid',
    service: 'budget-authority',
    deadLetterSubject: `${iso.token}.deadletter.outbox-relay`,
    data: '{"id":"not-a-uuid"}',
  });

  // Bad input is a usage error; a stream that is not there says where it looked.
  expect(await holdfast(['dead-letters', '--last', '-1'], env)).toMatchObject({ code: 2 });
  expect(await holdfast(['dead-letters', '--source', 'a.b>'], env)).toMatchObject({ code: 2 });
  const missing = await holdfast(['dead-letters'], { ...env, HOLDFAST_EVENTS_STREAM: 'NOPE' });
  expect(missing.code).toBe(7);
  expect(missing.stderr).toContain('NOPE_DEADLETTER');
});
