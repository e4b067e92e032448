/** Collections of one kind and cause, from `node --trace-gc` lines. */
export interface GcTally {
  count: number;
  /** The main thread's pauses, ms. */
  pauseMs: number;
  /** Incremental marking steps before a mark-compact, ms (also on the main thread). */
  stepsMs: number;
}

const LINE =
  /\d ms: ([A-Z][A-Za-z -]*?(?: \(reduce\))?) [\d.]+ \([\d.]+\) -> [\d.]+ \([\d.]+\) MB, ([\d.]+) \//;
const STEPS = /\(\+ ([\d.]+) ms in \d+ steps/;
const REASON = /current mu = [\d.]+\) ([^;]*)/;

/**
 * Tallies `--trace-gc` lines (other lines are skipped) by kind and cause, e.g. `Scavenge:
 * allocation failure` or `Mark-Compact: finalize incremental marking via task`.
 */
export function tallyGc(lines: Iterable<string>): Map<string, GcTally> {
  const out = new Map<string, GcTally>();
  for (const line of lines) {
    const m = LINE.exec(line);
    if (!m) continue;
    const key = `${m[1]}: ${REASON.exec(line)?.[1]?.trim() ?? '?'}`;
    const t = out.get(key) ?? { count: 0, pauseMs: 0, stepsMs: 0 };
    t.count += 1;
    t.pauseMs += Number(m[2]);
    t.stepsMs += Number(STEPS.exec(line)?.[1] ?? 0);
    out.set(key, t);
  }
  return out;
}
