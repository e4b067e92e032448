import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  chat,
  cliTest as test,
  holdfast,
  spawnHoldfast,
  TEAM_KEY,
  type CliStack,
} from './stack.js';

/** A chat call as the team; returns its reservation id. */
const call = async (s: CliStack) => (await chat(s, TEAM_KEY)).reservation;

/** Waits until the call's settlement is on the stream (the relay runs in the background). */
async function settled(s: CliStack, reservation: string): Promise<string> {
  return waitFor(
    async () => {
      const r = await holdfast(
        ['events', '--no-follow', '--type', 'reservation.settled'],
        s.eventsEnv,
      );
      return r.stdout.includes(reservation.slice(0, 8)) ? r.stdout : undefined;
    },
    { timeoutMs: 10_000, what: 'the settled event' },
  );
}

test('holdfast events --no-follow prints the stored events of a call, readable or as JSON lines', async ({
  stack,
}) => {
  const reservation = await call(stack);
  await settled(stack, reservation);
  const r = await holdfast(['events', '--no-follow', '--tenant', 'team'], stack.eventsEnv);
  expect(r).toMatchObject({ code: 0, stderr: '' });
  const lines = r.stdout.trim().split('\n');
  const mine = lines.filter((l) => l.includes(`res ${reservation.slice(0, 8)}`));
  expect(mine.map((l) => l.split(' ')[3])).toEqual(['reservation.created', 'reservation.settled']);
  expect(mine[1]).toMatch(
    /team reservation\.settled res \w{8} key team-1 UC-1 gpt-4o-mini: billed \d+ tokens \(\d+ prompt \+ \d+ completion\), \$0\.\d+, completed in \d+ ms {2}\[month-tokens [\d,]+ of 40,000\]$/,
  );

  const json = await holdfast(
    ['events', '--no-follow', '--json', '--type', 'reservation.created'],
    stack.eventsEnv,
  );
  const parsed = json.stdout
    .trim()
    .split('\n')
    .map(
      (l) =>
        JSON.parse(l) as {
          seq: number;
          subject: string;
          event: { type: string; reservationId: string };
        },
    );
  const created = parsed.find((p) => p.event.reservationId === reservation)!;
  expect(created.subject).toMatch(/\.events\.team\.reservation\.created$/);
  expect(parsed.every((p) => p.event.type === 'reservation.created')).toBe(true);

  // From a sequence: that event and what came after it.
  const from = await holdfast(
    ['events', '--no-follow', '--seq', String(created.seq), '--count', '1', '--json'],
    stack.eventsEnv,
  );
  expect(JSON.parse(from.stdout).seq).toBe(created.seq);
});

test('holdfast events follows new events until Ctrl-C; a wrong NATS or stream is exit 7', async ({
  stack,
}) => {
  const follow = spawnHoldfast(
    ['events', '--tenant', 'team', '--type', 'reservation.settled'],
    stack.eventsEnv,
  );
  // The consumer starts at "new": give it a moment to exist, then call until a line shows.
  const reservation = await waitFor(
    async () => {
      const id = await call(stack);
      await new Promise((r) => setTimeout(r, 300));
      return follow.lines.some((l) => l.includes(id.slice(0, 8))) ? id : undefined;
    },
    { timeoutMs: 15_000, what: 'a followed settlement' },
  );
  expect(follow.lines.find((l) => l.includes(reservation.slice(0, 8)))).toContain(
    'team reservation.settled',
  );
  expect(follow.lines.every((l) => l.includes(' reservation.settled '))).toBe(true);
  expect(await follow.interrupt()).toBe(0);

  const noNats = await holdfast(
    ['events', '--no-follow', '--nats', 'nats://127.0.0.1:1'],
    stack.eventsEnv,
  );
  expect(noNats.code).toBe(7);
  expect(noNats.stderr).toContain('cannot reach NATS at nats://127.0.0.1:1');
  const noStream = await holdfast(['events', '--no-follow'], {
    ...stack.eventsEnv,
    HOLDFAST_EVENTS_STREAM: 'NOPE',
  });
  expect(noStream.code).toBe(7);
  expect(noStream.stderr).toContain('cannot read stream NOPE');
});
