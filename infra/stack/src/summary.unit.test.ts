import { describe, expect, it } from 'vitest';
import { DEFAULT_STACK_DIR } from './env.js';
import type { RunningStack } from './stack.js';
import { summary } from './summary.js';

function running(file: string | undefined): RunningStack {
  const at = (port: number) => `http://127.0.0.1:${port}`;
  const entry = (url: string) => ({ url, started: true, note: undefined });
  return {
    state: {
      pid: 1,
      startedAt: new Date(0).toISOString(),
      urls: {
        edge: at(18080),
        mock: at(18089),
        nats: 'nats://127.0.0.1:14222',
        redis: 'redis://127.0.0.1:16379',
        clickhouse: at(18123),
        authorityOps: at(19101),
        aggregatorOps: at(19102),
        alerterOps: at(19103),
      },
      clickhouseDatabase: 'holdfast',
      natsNames: {},
      configPath: '/x/holdfast.yaml',
      processes: [],
    },
    infra: {
      nats: entry('nats://127.0.0.1:14222'),
      redis: entry('redis://127.0.0.1:16379'),
      clickhouse: entry(at(18123)),
    },
    upstream: { baseUrl: at(18089), describe: 'the mock' },
    anthropic: { baseUrl: at(18089), describe: 'the mock' },
    demoKeys: [{ tenant: 'support-bot', key: 'sk-hf-demo-support-bot' }],
    admin: { token: 'hf-admin-abc', file },
  };
}

describe('summary', () => {
  it('prints the admin token and commands to paste as they are, with the real ports', () => {
    const text = summary(running(`${DEFAULT_STACK_DIR}/admin-token`), DEFAULT_STACK_DIR);
    expect(text).toContain(
      '  admin token         hf-admin-abc  (kept in .tmp/stack/admin-token; pnpm holdfast reads it)',
    );
    expect(text).toContain(
      "  status page         http://127.0.0.1:18080/budgets  (sign in: the admin token, or a team's key)",
    );
    expect(text).toContain('  curl http://127.0.0.1:18080/v1/chat/completions');
    expect(text).toContain('\n  pnpm holdfast events --tenant support-bot\n');
    expect(text).toContain('\n  pnpm --filter @holdfast/billing-aggregator drift-audit\n');
    expect(text).toContain("  nats sub --server nats://127.0.0.1:14222 'holdfast.events.>'");
  });

  it('names a stack dir other than the default in every tool command', () => {
    const text = summary(running(undefined), '/tmp/elsewhere');
    expect(text).toContain('  admin token         EDGE_ADMIN_TOKEN, as you set it');
    expect(text).toContain('\n  HOLDFAST_STACK_DIR=/tmp/elsewhere pnpm holdfast usage\n');
    expect(text).toContain('\n  HOLDFAST_STACK_DIR=/tmp/elsewhere pnpm experiment\n');
  });

  it('says what runs where on a Redis Cluster (--cluster)', () => {
    const stack = running(undefined);
    const nodes = [1, 2, 3, 4, 5, 6].map((i) => `redis://127.0.0.1:1700${i}`).join(',');
    stack.infra.redis = {
      url: nodes,
      started: true,
      note: 'Redis Cluster: masters first on 17001',
    };
    const text = summary(stack, DEFAULT_STACK_DIR);
    expect(text).toContain(`  Redis               ${nodes}\n`);
    expect(text).toContain(
      '\n                      (started here; Redis Cluster: masters first on 17001)\n',
    );
  });
});
