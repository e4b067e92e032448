import { writeFile } from 'node:fs/promises';
import { AuthorityClient, connectNats, createLogger } from '@holdfast/runtime';
import { parseCli, USAGE } from './args.js';
import { runExperiment } from './experiment.js';
import { MockControl } from './mock.js';
import { controlsSummary, resultsTable, retryAfterTable, runLine, sweepTable } from './report.js';

/** `pnpm experiment`: seeds/000 against the running stack; tables on stdout, progress on stderr. */
async function main(): Promise<number> {
  const cli = parseCli(process.argv.slice(2), process.env);
  if (cli === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const nc = await connectNats({
    servers: cli.natsUrl,
    name: 'holdfast-experiment',
    logger: createLogger({ name: 'experiment', level: 'warn' }),
  });
  const authority = new AuthorityClient({ nc, names: cli.names, timeoutMs: 10_000 });
  const mock = new MockControl(cli.mockUrl);
  const original = await authority.configGet();
  if (!original.ok)
    throw new Error(`config.get: ${original.error.code}: ${original.error.message}`);
  const baseDocument = original.value.config as Record<string, unknown>;
  const mockBehaviour = await mock.config();

  // Whatever happens (an error, Ctrl-C), the stack gets its config and mock behaviour back.
  let restored: Promise<void> | undefined;
  const restore = () =>
    (restored ??= (async () => {
      const back = await authority.configApply({
        document: baseDocument,
        source: 'experiment:restore',
      });
      if (!back.ok) log(`could not restore the config: ${back.error.message}`);
      await mock.configure(mockBehaviour);
      await nc.drain();
    })());
  process.once('SIGINT', () => {
    log('interrupted: restoring the stack config');
    void restore().finally(() => process.exit(130));
  });

  log(
    `seeds/000 against ${cli.edgeUrl} (authority via ${cli.natsUrl}, mock ${cli.mockUrl}): ` +
      `modes ${cli.options.modes.join(',')}, workers ${cli.options.workers.join(',')}, ${cli.options.reps} reps`,
  );
  try {
    const result = await runExperiment(
      {
        edgeUrl: cli.edgeUrl,
        authority,
        mock,
        upstreamUrl: cli.upstreamUrl,
        baseDocument,
        firstTokenLatencyMs: cli.firstTokenLatencyMs,
        tokenDelayMs: cli.tokenDelayMs,
      },
      cli.options,
      (r, i, count) => log(`[${i}/${count}] ${runLine(r)}`),
    );
    const { budget } = cli.options;
    const out = [
      '',
      `## 60 digest calls against a ${budget.toLocaleString('en-US')}-token budget (median of ${cli.options.reps})`,
      '',
      resultsTable(result.runs, budget),
      '',
      ...controlsSummary([...result.runs, ...result.sweep, ...result.retryAfter]),
    ];
    if (result.sweep.length > 0) {
      out.push('', `## Budget sweep, ${cli.options.sweepWorkers} workers, one run per budget`, '');
      out.push(sweepTable(result.sweep));
    }
    if (result.retryAfter.length > 0) {
      out.push('', '## A client that honours Retry-After', '');
      out.push(retryAfterTable(result.runs, result.retryAfter, budget));
    }
    out.push(
      '',
      `${result.runs.length + result.sweep.length + result.retryAfter.length} runs in ${Math.round(result.seconds)} s.`,
      '',
    );
    process.stdout.write(out.join('\n'));
    if (cli.json) await writeFile(cli.json, `${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } finally {
    await restore();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`pnpm experiment: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
