import { relative } from 'node:path';
import { DEFAULT_STACK_DIR, REPO_ROOT } from './env.js';
import type { InfraEntry, RunningStack } from './stack.js';

function infraLine(label: string, entry: InfraEntry): string {
  const how = entry.started ? `started here${entry.note ? `; ${entry.note}` : ''}` : 'given';
  // A cluster's node list is long: what runs where goes on a line of its own.
  if (entry.url.includes(',')) {
    return `  ${label.padEnd(20)}${entry.url}\n  ${''.padEnd(20)}(${how})`;
  }
  return `  ${label.padEnd(20)}${entry.url}  (${how})`;
}

function shown(path: string): string {
  const rel = relative(REPO_ROOT, path);
  return rel.startsWith('..') ? path : rel;
}

/**
 * What a user needs once the stack is up: URLs, the admin token, demo keys, and commands to
 * paste as they are (the real ports; `pnpm holdfast` and the audit find the stack themselves).
 */
export function summary(stack: RunningStack, dir: string): string {
  const { urls } = stack.state;
  const key = stack.demoKeys.find((k) => k.tenant === 'support-bot') ?? stack.demoKeys[0];
  const subject = `${stack.state.natsNames.HOLDFAST_EVENTS_PREFIX ?? 'holdfast.events'}.>`;
  // The tools look in the default stack dir; another one has to be named.
  const tool = dir === DEFAULT_STACK_DIR ? '' : `HOLDFAST_STACK_DIR=${dir} `;
  const token = stack.admin.file
    ? `${stack.admin.token}  (kept in ${shown(stack.admin.file)}; pnpm holdfast reads it)`
    : 'EDGE_ADMIN_TOKEN, as you set it';
  const lines = [
    '',
    'Holdfast is running. Ctrl-C stops everything.',
    '',
    `  ${'edge (OpenAI API)'.padEnd(20)}${urls.edge}/v1  (Anthropic's: ${urls.edge})`,
    `  ${'status page'.padEnd(20)}${urls.edge}/budgets  (sign in: the admin token, or a team's key)`,
    `  ${'admin API'.padEnd(20)}${urls.edge}/admin`,
    `  ${'admin token'.padEnd(20)}${token}`,
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
  lines.push('', 'Try (ready to paste):');
  if (key) {
    lines.push(
      `  curl ${urls.edge}/v1/chat/completions -H 'authorization: Bearer ${key.key}' \\`,
      `    -H 'content-type: application/json' \\`,
      `    -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'`,
      `  ${tool}pnpm holdfast events --tenant ${key.tenant}`,
      `  ${tool}pnpm holdfast keys create --tenant ${key.tenant} --id my-key`,
    );
  }
  lines.push(
    `  ${tool}pnpm holdfast usage`,
    `  curl '${urls.clickhouse}/?query=SELECT+type,count()+FROM+${stack.state.clickhouseDatabase}.events_raw_v1+FINAL+GROUP+BY+type'`,
    `  ${tool}pnpm --filter @holdfast/billing-aggregator drift-audit`,
    `  ${tool}pnpm experiment`,
    `  nats sub --server ${urls.nats} '${subject}'   (with the nats CLI, if you have it)`,
    '',
  );
  return lines.join('\n');
}
