import { relative } from 'node:path';
import { REPO_ROOT } from './env.js';
import type { InfraEntry, RunningStack } from './stack.js';

function infraLine(label: string, entry: InfraEntry): string {
  const how = entry.started ? `started here${entry.note ? `; ${entry.note}` : ''}` : 'given';
  return `  ${label.padEnd(20)}${entry.url}  (${how})`;
}

function shown(path: string): string {
  const rel = relative(REPO_ROOT, path);
  return rel.startsWith('..') ? path : rel;
}

/** What a user needs once the stack is up: URLs, demo keys, and commands to try. */
export function summary(stack: RunningStack, dir: string): string {
  const { urls } = stack.state;
  const key = stack.demoKeys.find((k) => k.tenant === 'support-bot') ?? stack.demoKeys[0];
  const subject = `${stack.state.natsNames.HOLDFAST_EVENTS_PREFIX ?? 'holdfast.events'}.>`;
  const lines = [
    '',
    'Holdfast is running. Ctrl-C stops everything.',
    '',
    `  ${'edge (OpenAI API)'.padEnd(20)}${urls.edge}/v1  (Anthropic's: ${urls.edge})`,
    `  ${'status page'.padEnd(20)}${urls.edge}/budgets`,
    `  ${'model upstream'.padEnd(20)}${stack.upstream.describe}`,
    `  ${'claude upstream'.padEnd(20)}${stack.anthropic.describe}`,
    `  ${'mock upstream'.padEnd(20)}${urls.mock}  (/_mock/stats)`,
    `  ${'budget authority'.padEnd(20)}${urls.authorityOps}/metrics`,
    `  ${'billing aggregator'.padEnd(20)}${urls.aggregatorOps}/metrics`,
    `  ${'alerter'.padEnd(20)}${urls.alerterOps}/metrics`,
    infraLine('NATS', stack.infra.nats),
    infraLine('Redis', stack.infra.redis),
    infraLine('ClickHouse', stack.infra.clickhouse),
    `  ${'config'.padEnd(20)}${shown(stack.state.configPath)}`,
    `  ${'data'.padEnd(20)}${shown(dir)}  (delete it, stopped, to start from nothing)`,
  ];
  if (stack.demoKeys.length > 0) {
    lines.push('', 'Demo keys:');
    for (const k of stack.demoKeys) lines.push(`  ${k.key.padEnd(32)}${k.tenant}`);
  }
  lines.push('', 'Try:');
  if (key) {
    lines.push(
      `  curl ${urls.edge}/v1/chat/completions -H 'authorization: Bearer ${key.key}' \\`,
      `    -H 'content-type: application/json' \\`,
      `    -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'`,
    );
  }
  lines.push(
    `  nats sub --server ${urls.nats} '${subject}'`,
    `  curl '${urls.clickhouse}/?query=SELECT+type,count()+FROM+${stack.state.clickhouseDatabase}.events_raw_v1+FINAL+GROUP+BY+type'`,
    '  pnpm experiment',
    '',
  );
  return lines.join('\n');
}
