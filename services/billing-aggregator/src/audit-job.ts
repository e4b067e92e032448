import type { AuthorityClient } from '@holdfast/runtime';
import type { Logger } from '@holdfast/runtime';
import { exceeds, runAudit } from './audit.js';
import type { SqlExecutor } from './clickhouse.js';
import type { AggregatorMetrics } from './metrics.js';

/**
 * The periodic drift audit. Each run compares the authority's snapshot with the events up to
 * its time once they have had `settleMs` to land, so it holds under traffic; it sets
 * `holdfast_aggregator_audit_drift` and logs drift above the threshold as a warning, and as an
 * error when the next run drifts too (a race at the snapshot's instant does not repeat).
 */
export function startAuditJob(opts: {
  ch: SqlExecutor;
  database: string;
  authority: AuthorityClient;
  intervalMs: number;
  threshold: number;
  /** See runAudit: time for events up to the snapshot to land (two flush intervals + 2 s). */
  settleMs: number;
  metrics: AggregatorMetrics;
  logger: Logger;
}): { stop: () => Promise<void> } {
  const { logger, metrics } = opts;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  let drifted = false;

  const tick = async () => {
    const result = await runAudit(opts);
    if (!result.ok) {
      metrics.audits.inc({ result: 'failed' });
      logger.warn({ error: result.error.message }, 'drift audit could not run');
      return;
    }
    const report = result.value;
    metrics.auditDrift.set({ unit: 'tokens' }, report.maxDrift.tokens);
    metrics.auditDrift.set({ unit: 'usd' }, report.maxDrift.usd);
    const drifting = report.rows.filter((r) => r.drift !== 0);
    if (exceeds(report, opts.threshold)) {
      metrics.audits.inc({ result: 'drift' });
      const detail = { maxDrift: report.maxDrift, drifting: drifting.slice(0, 50) };
      if (drifted) {
        // What to alert on: a race at the snapshot's instant does not repeat.
        metrics.audits.inc({ result: 'drift_repeated' });
        logger.error(detail, 'drift audit: drift in consecutive runs');
      } else logger.warn(detail, 'drift audit: drift (checking again next run)');
      drifted = true;
    } else {
      drifted = false;
      metrics.audits.inc({ result: 'ok' });
      logger.info(
        {
          maxDrift: report.maxDrift,
          counters: report.rows.length,
          // Billed tenants the config no longer has: information, not drift.
          ...(report.removed.length > 0 ? { removedTenants: report.removed.length } : {}),
        },
        'drift audit: ok',
      );
    }
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick().finally(schedule);
    }, opts.intervalMs);
  };
  schedule();

  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
