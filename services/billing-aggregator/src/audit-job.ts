import type { AuthorityClient } from '@holdfast/runtime';
import type { Logger } from '@holdfast/runtime';
import { exceeds, runAudit } from './audit.js';
import type { SqlExecutor } from './clickhouse.js';
import type { AggregatorMetrics } from './metrics.js';

/**
 * The periodic drift audit. Each run logs its result (error above the threshold) and sets
 * `holdfast_aggregator_audit_drift`. Drift seen while events are still in flight is expected
 * to close by the next run; drift that stays is the finding.
 */
export function startAuditJob(opts: {
  ch: SqlExecutor;
  database: string;
  authority: AuthorityClient;
  intervalMs: number;
  threshold: number;
  metrics: AggregatorMetrics;
  logger: Logger;
}): { stop: () => Promise<void> } {
  const { logger, metrics } = opts;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  const tick = async () => {
    const result = await runAudit(opts);
    if (!result.ok) {
      metrics.audits.inc({ result: 'failed' });
      logger.warn({ error: result.error }, 'drift audit could not run');
      return;
    }
    const { report } = result;
    metrics.auditDrift.set({ unit: 'tokens' }, report.maxDrift.tokens);
    metrics.auditDrift.set({ unit: 'usd' }, report.maxDrift.usd);
    const drifting = report.rows.filter((r) => r.drift !== 0);
    if (exceeds(report, opts.threshold)) {
      metrics.audits.inc({ result: 'drift' });
      logger.error(
        { maxDrift: report.maxDrift, drifting: drifting.slice(0, 50) },
        'drift audit: drift',
      );
    } else {
      metrics.audits.inc({ result: 'ok' });
      logger.info({ maxDrift: report.maxDrift, counters: report.rows.length }, 'drift audit: ok');
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
