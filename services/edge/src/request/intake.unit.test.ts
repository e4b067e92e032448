import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Intake } from './intake.js';

/** An intake on a clock the test moves; `order` gets each turn's name as it is taken. */
function setup(share = 1) {
  const clock = { ms: 0 };
  const order: string[] = [];
  const waited: Array<[string, number]> = [];
  const intake = new Intake({
    inlineBytes: 100,
    share,
    now: () => clock.ms,
    onWaited: (tenant, seconds) => waited.push([tenant, seconds]),
  });
  const turn = (tenant: string, name: string, bytes = 1_000, gone = () => false) =>
    intake.turn(tenant, bytes, gone).then((taken) => {
      if (taken) order.push(name);
      return taken;
    });
  return { clock, order, waited, intake, turn };
}

describe('Intake', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'setImmediate'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('parses bodies up to inlineBytes at once, larger ones in turns', () => {
    const { intake } = setup();
    expect(intake.queues(100)).toBe(false);
    expect(intake.queues(101)).toBe(true);
  });

  it("gives turns fairly by bytes: another tenant's body goes before a backlog's next", async () => {
    const { order, turn, intake } = setup();
    const all = [
      turn('a', 'a1'),
      turn('a', 'a2'),
      turn('a', 'a3'),
      turn('b', 'b1'),
      turn('a', 'a4', 10),
    ];
    expect(intake.waiting()).toEqual(
      new Map([
        ['a', 4],
        ['b', 1],
      ]),
    );
    await vi.runAllTimersAsync();
    await Promise.all(all);
    // a1 and b1 both start at 0 (a came first); a2 starts after a1's 1,000 bytes, before a4.
    expect(order).toEqual(['a1', 'b1', 'a2', 'a3', 'a4']);
    expect(intake.waiting().size).toBe(0);
  });

  it('weighs turns by bytes: a small body of a tenant waits less than a large one of another', async () => {
    const { order, turn } = setup();
    const all = [
      turn('a', 'a1', 5_000),
      turn('a', 'a2', 5_000),
      turn('b', 'b1', 1_000),
      turn('b', 'b2', 1_000),
      turn('b', 'b3', 1_000),
    ];
    await vi.runAllTimersAsync();
    await Promise.all(all);
    expect(order).toEqual(['a1', 'b1', 'b2', 'b3', 'a2']);
  });

  it('skips a body whose client left while it waited: nothing parsed, no pause', async () => {
    const { order, turn, waited } = setup(0.5);
    let left = false;
    const first = turn('a', 'a1');
    const gone = turn('a', 'a2', 1_000, () => left);
    const third = turn('b', 'b1');
    left = true;
    await vi.runAllTimersAsync();
    expect(await gone).toBe(false);
    expect(await first).toBe(true);
    expect(await third).toBe(true);
    expect(order).toEqual(['a1', 'b1']);
    expect(waited.map(([t]) => t)).toEqual(['a', 'b']);
  });

  it('a check of a gone client that throws counts as gone: the turns behind it go on', async () => {
    const { order, turn } = setup();
    const broken = turn('a', 'a1', 1_000, () => {
      throw new Error('no socket');
    });
    const next = turn('b', 'b1');
    await vi.runAllTimersAsync();
    expect(await broken).toBe(false);
    expect(await next).toBe(true);
    expect(order).toEqual(['b1']);
  });

  it('keeps the turns to their share of the loop: after a turn of d ms, the next waits d (1 - share) / share', async () => {
    const { clock, order, turn } = setup(0.25);
    void turn('a', 'a1').then(() => {
      clock.ms += 40; // the parse and what follows it took 40 ms
    });
    void turn('b', 'b1');
    await vi.advanceTimersToNextTimerAsync(); // a1's turn
    expect(order).toEqual(['a1']);
    await vi.advanceTimersToNextTimerAsync(); // its end is measured: the next turn in 120 ms
    clock.ms += 119;
    await vi.advanceTimersByTimeAsync(119);
    expect(order).toEqual(['a1']);
    clock.ms += 1;
    await vi.advanceTimersByTimeAsync(1);
    expect(order).toEqual(['a1', 'b1']);
  });

  it('starts fairness afresh once nobody waits', async () => {
    const { order, turn } = setup();
    await Promise.all([turn('a', 'a1', 50_000), vi.runAllTimersAsync()]);
    // a's 50,000 bytes are forgotten: a and b now start equal, a came first.
    const all = [turn('a', 'a2'), turn('b', 'b1'), turn('a', 'a3')];
    await vi.runAllTimersAsync();
    await Promise.all(all);
    expect(order).toEqual(['a1', 'a2', 'b1', 'a3']);
  });

  it('refuses a share outside (0, 1]', () => {
    expect(() => new Intake({ inlineBytes: 1, share: 0 })).toThrow(RangeError);
    expect(() => new Intake({ inlineBytes: 1, share: 1.5 })).toThrow(RangeError);
  });
});
