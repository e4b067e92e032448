import type { Mode } from './run-config.js';
import { runOnce, type RunResult, type RunSpec, type Target } from './run.js';

export interface ExperimentOptions {
  modes: Mode[];
  workers: number[];
  reps: number;
  /** batch-summariser's month budget in the main runs (seeds/000: 40,000). */
  budget: number;
  /** Budgets of the sweep (post vs reserve at `sweepWorkers`); empty: no sweep. */
  sweep: number[];
  sweepWorkers: number;
  /** Also run a client that honours Retry-After (each mode, at the largest worker count). */
  retryAfter: boolean;
}

export interface ExperimentResult {
  options: ExperimentOptions;
  runs: RunResult[];
  sweep: RunResult[];
  retryAfter: RunResult[];
  seconds: number;
}

/**
 * Every mode x worker count x repetition (repetitions outermost, so a slow moment of the box
 * spreads over all modes), then the sweep, then the Retry-After client. Each run applies its
 * own config with fresh tenants; `onRun` sees each result as it finishes.
 */
export async function runExperiment(
  target: Target,
  o: ExperimentOptions,
  onRun: (r: RunResult, index: number, count: number) => void,
): Promise<ExperimentResult> {
  const started = performance.now();
  const main: RunSpec[] = [];
  for (let rep = 0; rep < o.reps; rep++) {
    for (const mode of o.modes) {
      for (const workers of o.workers) {
        main.push({
          mode,
          workers,
          batchBudget: o.budget,
          phases: 'full',
          honourRetryAfter: false,
        });
      }
    }
  }
  const sweep: RunSpec[] = o.sweep.flatMap((batchBudget) =>
    (['post', 'reserve'] as const).map((mode) => ({
      mode,
      workers: o.sweepWorkers,
      batchBudget,
      phases: 'digests' as const,
      honourRetryAfter: false,
    })),
  );
  const widest = Math.max(...o.workers);
  const retry: RunSpec[] = o.retryAfter
    ? o.modes.map((mode) => ({
        mode,
        workers: widest,
        batchBudget: o.budget,
        phases: 'digests' as const,
        honourRetryAfter: true,
      }))
    : [];
  const count = main.length + sweep.length + retry.length;
  let index = 0;
  const runAll = async (specs: RunSpec[]) => {
    const results: RunResult[] = [];
    for (const spec of specs) {
      const r = await runOnce(target, spec);
      results.push(r);
      onRun(r, ++index, count);
    }
    return results;
  };
  return {
    options: o,
    runs: await runAll(main),
    sweep: await runAll(sweep),
    retryAfter: await runAll(retry),
    seconds: (performance.now() - started) / 1_000,
  };
}
