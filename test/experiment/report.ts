import type { Mode } from './run-config.js';
import type { RunResult } from './run.js';
import { total } from './workload.js';

const MODE_LABELS: Record<Mode, string> = {
  meter: 'meter only (`meter`)',
  post: 'check, bill after (`post`)',
  estimate: 'estimate prompt (`estimate`)',
  reserve: 'reserve max_tokens (`reserve`)',
};

const n = (x: number) => Math.round(x).toLocaleString('en-US');

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** `+12.5%` over the budget, or `95.4% used` at or under it. */
export function vsBudget(billed: number, budget: number): string {
  const pct = (billed / budget) * 100;
  return billed > budget ? `+${(pct - 100).toFixed(1)}%` : `${pct.toFixed(1)}% used`;
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** The seed's table: one row per mode, each cell `4 workers / 16 workers`, medians of the reps. */
export function resultsTable(runs: RunResult[], budget: number): string {
  const modes = [...new Set(runs.map((r) => r.spec.mode))];
  const workers = [...new Set(runs.map((r) => r.spec.workers))].sort((a, b) => a - b);
  const rows = modes.map((mode) => {
    const cells = workers.map((w) => {
      const rs = runs.filter((r) => r.spec.mode === mode && r.spec.workers === w);
      const billed = median(rs.map((r) => r.billed));
      return {
        billed: n(billed),
        vs: vsBudget(billed, budget),
        served: String(median(rs.map((r) => r.digests.served))),
        refused: String(median(rs.map((r) => total(r.digests.refused)))),
        worst: n(Math.max(...rs.map((r) => r.billed))),
      };
    });
    const join = (k: keyof (typeof cells)[number]) => cells.map((c) => c[k]).join(' / ');
    return [
      MODE_LABELS[mode],
      workers.join(' / '),
      join('billed'),
      join('vs'),
      join('served'),
      join('refused'),
      join('worst'),
    ];
  });
  return table(
    [
      'Mode',
      'Workers',
      'Billed (median)',
      'vs budget',
      'Calls served',
      'Calls refused (429)',
      'Billed (worst run)',
    ],
    rows,
  );
}

/** Budget sweep at one worker count: post vs reserve per budget. */
export function sweepTable(runs: RunResult[]): string {
  const budgets = [...new Set(runs.map((r) => r.spec.batchBudget))].sort((a, b) => a - b);
  const cell = (budget: number, mode: Mode) => {
    const r = runs.find((x) => x.spec.batchBudget === budget && x.spec.mode === mode);
    return r
      ? [n(r.billed), vsBudget(r.billed, budget), String(r.digests.served)]
      : ['-', '-', '-'];
  };
  return table(
    [
      'Budget',
      'post: billed',
      'post: vs budget',
      'post: served',
      'reserve: billed',
      'reserve: vs budget',
      'reserve: served',
    ],
    budgets.map((b) => [n(b), ...cell(b, 'post'), ...cell(b, 'reserve')]),
  );
}

/** What a client that honours Retry-After gets, next to the one that drops refused items. */
export function retryAfterTable(
  plain: RunResult[],
  honouring: RunResult[],
  budget: number,
): string {
  const rows: string[][] = [];
  for (const h of honouring) {
    const base = plain.filter(
      (r) => r.spec.mode === h.spec.mode && r.spec.workers === h.spec.workers,
    );
    if (base.length > 0) {
      const billed = median(base.map((r) => r.billed));
      rows.push([
        MODE_LABELS[h.spec.mode],
        'drops a refused item',
        String(median(base.map((r) => r.digests.served))),
        n(billed),
        vsBudget(billed, budget),
        '0',
        `${(median(base.map((r) => r.digests.ms)) / 1_000).toFixed(1)} s`,
      ]);
    }
    rows.push([
      MODE_LABELS[h.spec.mode],
      'honours Retry-After',
      String(h.digests.served),
      n(h.billed),
      vsBudget(h.billed, budget),
      String(h.digests.retries),
      `${(h.digests.ms / 1_000).toFixed(1)} s`,
    ]);
  }
  return table(['Mode', 'Client', 'Served', 'Billed', 'vs budget', 'Retries', 'Time'], rows);
}

/** The controls the seed checked once: clamp, isolation, register, and the billing cross-check. */
export function controlsSummary(runs: RunResult[]): string[] {
  const full = runs.filter((r) => r.triage && r.unregistered && r.unknownTeam);
  const digestsServed = runs.flatMap((r) => r.digests.completions);
  const atCap = digestsServed.filter((c) => c >= 1_024).length;
  const prompts = runs.flatMap((r) => r.digests.prompts);
  const mismatched = runs.filter((r) => r.billed !== r.providerBilled);
  const lines = [
    `- Billing cross-check: the authority's settled total equals what the provider (mock) billed in ${runs.length - mismatched.length} of ${runs.length} runs${mismatched.map((r) => `; ${r.runId}: ${n(r.billed)} vs ${n(r.providerBilled)}`).join('')}.`,
    `- Digest prompt as Holdfast counted it: median ${median(prompts)} tokens; ${n(atCap)} of ${n(digestsServed.length)} served digests (${((atCap / Math.max(1, digestsServed.length)) * 100).toFixed(0)}%) used the full 1,024-token allowance.`,
  ];
  if (full.length > 0) {
    const triage = full.map((r) => r.triage!);
    const caps = triage.flatMap((t) => t.upstreamMaxTokens);
    const replies = triage.flatMap((t) => t.completions);
    const codes = (pick: (r: RunResult) => Record<string, number>) =>
      [...new Set(full.flatMap((r) => Object.keys(pick(r))))].join(', ');
    lines.push(
      `- support-bot (asks for 4,096, cap 512): served ${range(triage.map((t) => t.served))} of 24 in every run; the model received max_tokens ${[...new Set(caps)].join(', ')} on all ${n(caps.length)} calls; median reply ${median(replies)} tokens, ${replies.filter((c) => c >= 512).length} of ${n(replies.length)} reached 512.`,
      `- Unregistered use case (finance-ops, x-use-case UC-999): ${sum(full, (r) => total(r.unregistered!.refused))} of ${full.length * 6} refused (${codes((r) => r.unregistered!.refused)}), ${sum(full, (r) => r.unregistered!.reachedModel)} reached the model.`,
      `- Unknown team (a key no tenant has): ${sum(full, (r) => total(r.unknownTeam!.refused))} of ${full.length * 6} refused (${codes((r) => r.unknownTeam!.refused)}), ${sum(full, (r) => r.unknownTeam!.reachedModel)} reached the model.`,
    );
  }
  return lines;
}

/** `24`, or `22-24` when the runs differ. */
function range(xs: number[]): string {
  const [lo, hi] = [Math.min(...xs), Math.max(...xs)];
  return lo === hi ? String(lo) : `${lo}-${hi}`;
}

function sum(runs: RunResult[], f: (r: RunResult) => number): number {
  return runs.reduce((a, r) => a + f(r), 0);
}

/** One line per finished run, printed as the experiment goes. */
export function runLine(r: RunResult): string {
  const s = r.spec;
  const codes = Object.entries(r.digests.refused)
    .map(([c, k]) => `${k} ${c}`)
    .join(', ');
  return `${s.mode.padEnd(8)} ${String(s.workers).padStart(2)} workers, budget ${n(s.batchBudget)}${s.honourRetryAfter ? ', honours Retry-After' : ''}: billed ${n(r.billed)} (${vsBudget(r.billed, s.batchBudget)}), served ${r.digests.served}, refused ${total(r.digests.refused)}${codes ? ` (${codes})` : ''}, ${(r.digests.ms / 1_000).toFixed(1)} s`;
}
