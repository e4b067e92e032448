import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { infraTest as test } from '@holdfast/testkit';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { DeadLetters } from '../jetstream/dead-letters.js';
import { createLogger } from '../logger.js';
import { ensureEventsStream } from '../nats.js';

const run = promisify(execFile);
const TOOL = fileURLToPath(new URL('../../dist/cli/dead-letters.js', import.meta.url));

test('the dead-letters tool shows an operator every parked message: reason, service, origin, body', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await ensureEventsStream(await jetstreamManager(nc), iso.names);
  const letters = (source: string) =>
    new DeadLetters({
      js: jetstream(nc),
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
  const env = { ...process.env, NATS_URL: natsUrl, HOLDFAST_EVENTS_STREAM: iso.names.eventsStream };

  const human = await run('node', [TOOL], { env });
  expect(human.stdout).toContain('reason:  id: invalid uuid');
  expect(human.stdout).toContain('from:    budget-authority, outbox entry hf:{acme}:outbox 1-0');
  expect(human.stdout).toContain('2 dead letter(s) shown');

  const json = await run('node', [TOOL, '--json', '--source', 'outbox-relay'], { env });
  const lines = json.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(JSON.parse(lines[0]!)).toMatchObject({
    reason: 'id: invalid uuid',
    service: 'budget-authority',
    deadLetterSubject: `${iso.token}.deadletter.outbox-relay`,
    data: '{"id":"not-a-uuid"}',
  });
});
