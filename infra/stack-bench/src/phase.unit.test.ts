import { describe, expect, it } from 'vitest';
import { plan } from './phase.js';

describe('plan', () => {
  it('puts the targets of a load side by side and reverses their order every round', () => {
    const phases = plan({ rounds: 2, connections: 32, rates: [100], stream: false });
    expect(phases.map((p) => `${p.round} ${p.load} ${p.target}`)).toEqual([
      '0 closed@32 direct',
      '0 closed@32 proxy',
      '0 closed@32 stack',
      '0 closed@32 floor',
      '0 closed@32 floor-single',
      '0 open 100/s direct',
      '0 open 100/s proxy',
      '0 open 100/s stack',
      '0 open 100/s floor',
      '0 open 100/s floor-single',
      '1 closed@32 floor-single',
      '1 closed@32 floor',
      '1 closed@32 stack',
      '1 closed@32 proxy',
      '1 closed@32 direct',
      '1 open 100/s floor-single',
      '1 open 100/s floor',
      '1 open 100/s stack',
      '1 open 100/s proxy',
      '1 open 100/s direct',
    ]);
  });

  it('runs the streamed loop on direct, proxy and stack only, and the floor only when asked', () => {
    const phases = plan({ rounds: 2, connections: 32, rates: [100], stream: true, floor: false });
    expect(phases.map((p) => `${p.round} ${p.load} ${p.target}`)).toEqual([
      '0 closed@32 direct',
      '0 closed@32 proxy',
      '0 closed@32 stack',
      '0 closed@32 stream direct',
      '0 closed@32 stream proxy',
      '0 closed@32 stream stack',
      '0 open 100/s direct',
      '0 open 100/s proxy',
      '0 open 100/s stack',
      '1 closed@32 stack',
      '1 closed@32 proxy',
      '1 closed@32 direct',
      '1 closed@32 stream stack',
      '1 closed@32 stream proxy',
      '1 closed@32 stream direct',
      '1 open 100/s stack',
      '1 open 100/s proxy',
      '1 open 100/s direct',
    ]);
    const floored = plan({ rounds: 1, connections: 32, rates: [], stream: true });
    expect(floored.filter((p) => p.stream).map((p) => p.target)).toEqual([
      'direct',
      'proxy',
      'stack',
    ]);
  });
});
