#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { stackEnv } from '@holdfast/config';
import { retry } from '@holdfast/retry';
import { AuthorityClient, connectNats, createLogger } from '@holdfast/runtime';
import { exceeds, runAudit, type AuditReport } from '../audit.js';
import { createClickHouse } from '../clickhouse.js';
import { loadConfig } from '../env.js';

const USAGE = `Usage: pnpm --filter @holdfast/billing-aggregator drift-audit [--threshold N] [--tenant ID] [--wait MS] [--json]
       (the binary: holdfast-billing-audit)

Compares the budget authority's counters with the sums of the events in ClickHouse (each budget
window, keys' and end users' too, with what its own events charged it; each tenant's lifetime
totals), and prints the drift (clickhouse - authority). Tenants billed in
ClickHouse that the config no longer has (removed, e.g. by pnpm experiment) are listed apart:
they have no counters to compare, and are not drift. Exit code: 0 when every drift is within
the threshold, 1 above it, 2 when the audit could not run.

  --threshold N   largest accepted drift, tokens or micro-USD (default: BILLING_AGGREGATOR_AUDIT_THRESHOLD, 0)
  --tenant ID     only this tenant's counters (its keys' and end users' windows included)
  --wait MS       re-run until within the threshold or MS have passed (events still in flight)
  --settle MS     between the authority's snapshot and the ClickHouse sums, wait MS so events up
                  to the snapshot can land (an audit under traffic; 0 after quiescence)
  --json          print the report as JSON

Connections come from NATS_URL, CLICKHOUSE_URL, CLICKHOUSE_DATABASE, HOLDFAST_* (as the service);
what is unset comes from the running pnpm stack (stack.json in HOLDFAST_STACK_DIR, default .tmp/stack).`;

function table(report: AuditReport): string {
  const head = ['tenant', 'counter', 'authority', 'clickhouse', 'drift'];
  const body = report.rows.map((r) => [
    r.tenant,
    r.counter,
    String(r.authority),
    String(r.clickhouse),
    r.drift === 0 ? '0' : `${r.drift > 0 ? '+' : ''}${r.drift}`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i >= 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}

function removedTable(report: AuditReport): string {
  if (report.removed.length === 0) return '';
  const rows = report.removed.map(
    (r) =>
      `  ${r.tenant}  ${r.lifetimeTokens.toLocaleString('en-US')} tokens, ${(r.lifetimeMicroUsd / 1e6).toFixed(6)} USD`,
  );
  return `\n\nnot in the config any more (billed before they were removed; no counters to compare, not drift):\n${rows.join('\n')}`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      threshold: { type: 'string' },
      tenant: { type: 'string' },
      wait: { type: 'string' },
      settle: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  // What the user did not set comes from the running `pnpm stack`.
  const config = loadConfig({ LOG_LEVEL: 'warn', ...stackEnv(process.env), ...process.env });
  const threshold =
    values.threshold === undefined ? config.audit.threshold : Number(values.threshold);
  const waitMs = values.wait === undefined ? 0 : Number(values.wait);
  const settleMs = values.settle === undefined ? 0 : Number(values.settle);
  if ([threshold, waitMs, settleMs].some((n) => !Number.isInteger(n) || n < 0)) {
    console.error(USAGE);
    return 2;
  }
  const logger = createLogger({ name: 'billing-audit', level: 'warn' });
  const nc = await connectNats({ servers: config.nats.servers, name: 'billing-audit', logger });
  const ch = createClickHouse({ ...config.clickhouse, quiet: true });
  try {
    const authority = new AuthorityClient({ nc, names: config.nats.names, timeoutMs: 5_000 });
    const result = await retry(
      () =>
        runAudit({
          ch,
          database: config.clickhouse.database,
          authority,
          tenant: values.tenant,
          settleMs,
        }),
      {
        // Events still in flight: run again every 500 ms until within the threshold or --wait.
        policy: { initialMs: 500, maxMs: 500, factor: 1, retryForMs: waitMs },
        retryIf: (r) => r.ok && exceeds(r.value, threshold),
        retryable: () => false,
      },
    );
    if (!result.ok) {
      console.error(`audit failed: ${result.error.message}`);
      return 2;
    }
    const report = result.value;
    const over = exceeds(report, threshold);
    if (values.json) console.log(JSON.stringify({ ...report, threshold, ok: !over }, null, 2));
    else {
      console.log(table(report) + removedTable(report));
      console.log(
        `\nmax drift: ${report.maxDrift.tokens} tokens, ${report.maxDrift.usd} micro-USD (threshold ${threshold}) at ${report.time}: ${over ? 'DRIFT' : 'ok'}`,
      );
    }
    return over ? 1 : 0;
  } finally {
    await ch.close();
    await nc.drain();
  }
}

process.exitCode = await main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  return 2;
});
