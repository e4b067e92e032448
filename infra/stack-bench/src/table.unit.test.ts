import { describe, expect, it } from 'vitest';
import { phase } from '../test/phases.js';
import { summarise } from './summary.js';
import { renderReport } from './table.js';

/** The first line that starts with `words` (spaces before, and any number between them). */
const line = (report: string, words: string) => {
  const start = new RegExp(`^\\s*${words.trim().split(/\s+/).join('\\s+')}\\s`);
  return report.split('\n').find((l) => start.test(l)) ?? '';
};

describe('renderReport', () => {
  const withProxy = renderReport(
    summarise(
      [phase(0, 'direct', 1000, 1), phase(0, 'proxy', 500, 2), phase(0, 'stack', 100, 10)],
      2,
    ),
    'header',
  );

  it('shows each load on the three targets, the stack against direct and against proxy', () => {
    const [header] = withProxy.split('\n').slice(2);
    expect(header).toMatch(/against direct +against proxy$/);
    expect(line(withProxy, 'closed@32 proxy')).toMatch(/0\.500x of direct$/);
    expect(line(withProxy, 'closed@32 stack')).toMatch(/0\.100x of direct +0\.200x of proxy$/);
  });

  it("gives the bare proxy's phases a CPU table of their own, and the edge less the proxy", () => {
    expect(withProxy).toContain('CPU µs per call, bare proxy  closed@32');
    expect(line(withProxy, 'bare proxy')).toMatch(/ 200$/);
    expect(line(withProxy, 'edge less bare proxy')).toMatch(/ 300$/);
  });

  it('gives the system calls per call of every process of the stack', () => {
    expect(withProxy).toMatch(/^System calls per call \(reads \/ writes\), stack +closed@32$/m);
    expect(withProxy).toMatch(/^edge +4\.00 \/ 3\.00$/m);
    expect(withProxy).toMatch(/^budget authority +2\.00 \/ 1\.00$/m);
  });

  it('leaves the proxy out of a run that had none', () => {
    const report = renderReport(
      summarise([phase(0, 'direct', 1000, 1), phase(0, 'stack', 100, 10)], 2),
      'header',
    );
    expect(report).not.toContain('proxy');
    expect(line(report, 'closed@32 stack')).toMatch(/0\.100x of direct$/);
  });

  it('puts the floor beside the stack in one table per load, role by role', () => {
    const report = renderReport(
      summarise(
        [
          phase(0, 'direct', 1000, 1),
          phase(0, 'stack', 100, 10),
          phase(0, 'floor', 400, 2),
          phase(0, 'floor-single', 300, 3),
        ],
        2,
      ),
      'header',
    );
    expect(report).toMatch(
      /^closed@32: stack beside the floor +stack +floor +floor, single +stack less floor$/m,
    );
    expect(line(report, 'edge µs')).toMatch(/ 500 +150 +150 +350$/);
    expect(line(report, 'authority')).toMatch(/ 300 +100 +100 +200$/);
    expect(line(report, 'all of Holdfast, CPU')).toMatch(/ 880 +320 +320 +560$/);
    expect(line(report, "floor's share")).toMatch(/ 36% +36%$/);
    expect(line(report, 'closed@32 floor')).toMatch(/0\.400x of direct$/);
    expect(report).toContain('CPU µs per call, floor (batched)');
    expect(report).toMatch(/^The floor idle/m);
  });
});
