import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { REPO_ROOT } from '@holdfast/stack';
import { findBinary } from '@holdfast/testkit';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { dockerfile } from './dockerfile.js';

interface ComposeService {
  image?: string;
  profiles?: string[];
  build?: { context: string; dockerfile: string; args?: Record<string, string> };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}

/** `docker-compose config`: what Docker would run, validated and with variables filled in. */
function composeConfig(
  env: Record<string, string> = {},
  args: string[] = [],
): Record<string, ComposeService> {
  const bin = findBinary('docker-compose');
  if (!bin) {
    throw new Error(
      'docker-compose is not installed: apt-get install -y docker-compose (it validates docker-compose.yml without a Docker engine)',
    );
  }
  const run = spawnSync(bin, ['-f', 'docker-compose.yml', ...args, 'config'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  if (run.status !== 0) throw new Error(`docker-compose config failed:\n${run.stderr}`);
  return (parse(run.stdout) as { services: Record<string, ComposeService> }).services;
}

const HOLDFAST = {
  'mock-upstream': { dir: 'infra/mock-upstream', port: '8089', portVar: 'MOCK_UPSTREAM_PORT' },
  'budget-authority': {
    dir: 'services/budget-authority',
    port: '9101',
    portVar: 'AUTHORITY_OPS_PORT',
  },
  'billing-aggregator': {
    dir: 'services/billing-aggregator',
    port: '9102',
    portVar: 'BILLING_AGGREGATOR_OPS_PORT',
  },
  alerter: { dir: 'services/alerter', port: '9103', portVar: 'ALERTER_OPS_PORT' },
  edge: { dir: 'services/edge', port: '8080', portVar: 'EDGE_PORT' },
} as const;

/** Runs the edge's compose command in a shell with `exec node` replaced by `instead`. */
function edgeShell(env: Record<string, string>, instead: string): string {
  const edge = composeConfig(env).edge!;
  const script = edge.command![2]!.replaceAll('$$', '$').replace('exec node dist/main.js', instead);
  return spawnSync('sh', ['-c', script], { env: edge.environment, encoding: 'utf8' }).stdout.trim();
}

describe('docker-compose.yml', () => {
  const services = composeConfig();

  const redisCluster = Object.keys(services).filter(
    (n) => n.startsWith('redis-') && services[n]?.profiles?.includes('cluster'),
  );

  it('runs NATS, Redis, ClickHouse, the mock, the four services and Grafana', () => {
    const always = Object.keys(services).filter((name) => !services[name]?.profiles);
    expect(always.sort()).toEqual(
      ['nats', 'redis', 'clickhouse', 'grafana', ...Object.keys(HOLDFAST)].sort(),
    );
    expect(services.nats?.image).toBe('nats:2.10-alpine');
    expect(services.nats?.command).toContain('--jetstream');
    expect(services.redis?.image).toMatch(/^redis:7/);
    // An acknowledged decision survives kill -9 of Redis: every write fsynced first.
    expect(services.redis?.command?.join(' ')).toContain('--appendonly yes --appendfsync always');
    expect(services.clickhouse?.image).toMatch(/^clickhouse\/clickhouse-server:/);
  });

  it('builds every Holdfast process from the one Dockerfile, with its ops port published on loopback', () => {
    for (const [name, s] of Object.entries(HOLDFAST)) {
      const svc = services[name]!;
      expect(svc.build?.dockerfile, name).toBe('infra/docker/Dockerfile');
      expect(svc.build?.args, name).toEqual({ SERVICE: s.dir, HEALTH_PORT: s.port });
      expect(existsSync(resolve(REPO_ROOT, s.dir, 'tsconfig.src.json')), name).toBe(true);
      expect(svc.environment?.HEALTH_PORT, name).toBe(s.port);
      expect(svc.environment?.[s.portVar], name).toBe(s.port);
      expect(svc.ports, name).toEqual([`127.0.0.1:${s.port}:${s.port}/tcp`]);
    }
    expect(services.grafana?.ports).toEqual(['127.0.0.1:3000:3000/tcp']);
  });

  it('has a healthcheck on every service; the Holdfast ones are the image HEALTHCHECK', () => {
    for (const [name, svc] of Object.entries(services)) {
      // The cluster's create job runs once and exits: nothing to probe.
      if (name === 'redis-cluster-init') continue;
      expect(svc.healthcheck?.test?.[0], name).toBe('CMD');
    }
    for (const name of Object.keys(HOLDFAST)) {
      expect(services[name]?.healthcheck?.test, name).toEqual(dockerfile().healthcheck);
    }
  });

  it('--profile cluster adds a Redis Cluster of six durable nodes and a one-shot create; its env file points the authority at it with WAIT 1', () => {
    const nodes = [1, 2, 3, 4, 5, 6].map((i) => `redis-c${i}`);
    expect(redisCluster.sort()).toEqual([...nodes, 'redis-cluster-init'].sort());
    for (const n of nodes) {
      const cmd = services[n]!.command!.join(' ');
      expect(cmd, n).toContain('--cluster-enabled yes');
      expect(cmd, n).toContain('--cluster-require-full-coverage no');
      expect(cmd, n).toContain('--appendfsync always');
      expect(services[n]!.volumes?.[0], n).toMatch(new RegExp(`${n}-data:/data`));
    }
    const init = services['redis-cluster-init']!;
    expect(Object.keys(init.depends_on ?? {}).sort()).toEqual(nodes);
    expect(init.command?.join(' ')).toContain('--cluster-replicas 1');
    // One Redis by default; the cluster's nodes, as a cluster, with the env file.
    expect(services['budget-authority']!.environment).toMatchObject({
      REDIS_URL: 'redis://redis:6379',
      REDIS_CLUSTER: '',
    });
    const cluster = composeConfig({}, ['--env-file', 'infra/docker/cluster.env']);
    expect(cluster['budget-authority']!.environment).toMatchObject({
      REDIS_URL: nodes.map((n) => `redis://${n}:6379`).join(','),
      REDIS_CLUSTER: 'true',
      AUTHORITY_REDIS_WAIT_REPLICAS: '1',
    });
  });

  it('starts each service after what it needs is healthy', () => {
    const needs = (name: string) =>
      Object.entries(services[name]?.depends_on ?? {}).map(([dep, d]) => {
        expect(d.condition, `${name} -> ${dep}`).toBe('service_healthy');
        return dep;
      });
    expect(needs('budget-authority').sort()).toEqual(['nats', 'redis']);
    expect(needs('billing-aggregator').sort()).toEqual(['budget-authority', 'clickhouse', 'nats']);
    expect(needs('alerter').sort()).toEqual(['budget-authority', 'nats']);
    expect(needs('edge').sort()).toEqual(['budget-authority', 'mock-upstream', 'nats']);
    expect(needs('grafana').sort()).toEqual(['billing-aggregator', 'clickhouse']);
  });

  it('mounts files that exist: the example config, the Grafana provisioning and dashboards', () => {
    const mounts = ['budget-authority', 'grafana'].flatMap((name) =>
      (services[name]?.volumes ?? []).filter((v) => v.startsWith('/')).map((v) => v.split(':')[0]!),
    );
    expect(mounts.map((m) => m.slice(REPO_ROOT.length))).toEqual([
      'infra/config/holdfast.example.yaml',
      'infra/grafana/provisioning',
      'infra/grafana/dashboards',
    ]);
    for (const m of mounts) expect(existsSync(m), m).toBe(true);
    expect(services['budget-authority']?.environment?.HOLDFAST_CONFIG).toBe(
      '/etc/holdfast/holdfast.yaml',
    );
  });

  it('sends the edge to the mock, to the provider when only its key is set, or to its *_BASE_URL', () => {
    const upstream = (env: Record<string, string>, variable = 'OPENAI_BASE_URL') =>
      edgeShell(env, `echo "$${variable}"`);
    expect(upstream({ OPENAI_API_KEY: '', OPENAI_BASE_URL: '' })).toBe(
      'http://mock-upstream:8089/v1',
    );
    expect(upstream({ OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: '' })).toBe(
      'https://api.openai.com/v1',
    );
    expect(upstream({ OPENAI_API_KEY: '', OPENAI_BASE_URL: 'http://vllm:8000/v1' })).toBe(
      'http://vllm:8000/v1',
    );
    // The claude upstream the same way, from Anthropic's variables (the mock's root by default).
    const claude = (env: Record<string, string>) => upstream(env, 'ANTHROPIC_BASE_URL');
    expect(claude({ ANTHROPIC_API_KEY: '', ANTHROPIC_BASE_URL: '' })).toBe(
      'http://mock-upstream:8089',
    );
    expect(claude({ ANTHROPIC_API_KEY: 'sk-ant', ANTHROPIC_BASE_URL: '' })).toBe(
      'https://api.anthropic.com',
    );
  });

  it('turns the admin API on with EDGE_ADMIN_TOKEN, and an empty one means none', () => {
    const token = (env: Record<string, string>) =>
      edgeShell(env, 'echo "${EDGE_ADMIN_TOKEN-unset}"');
    expect(token({ EDGE_ADMIN_TOKEN: '' })).toBe('unset');
    expect(token({ EDGE_ADMIN_TOKEN: 'an-admin-token-of-24-chars' })).toBe(
      'an-admin-token-of-24-chars',
    );
  });

  it('the cluster profile: three routed JetStream nodes, and its env file puts every service on all three at R3', () => {
    const nodes = ['nats-1', 'nats-2', 'nats-3'];
    for (const name of nodes) {
      const cmd = services[name]!.command!;
      expect(services[name]?.profiles, name).toEqual(['cluster']);
      expect(cmd, name).toContain('--jetstream');
      expect(cmd[cmd.indexOf('--server_name') + 1], name).toBe(name);
      const routes = cmd[cmd.indexOf('--routes') + 1]!.split(',');
      const others = nodes.filter((n) => n !== name).map((n) => `nats://${n}:6222`);
      expect(routes.sort(), name).toEqual(others);
    }
    const cluster = composeConfig({}, ['--env-file', 'infra/docker/cluster.env']);
    for (const name of ['budget-authority', 'billing-aggregator', 'alerter', 'edge']) {
      expect(services[name]?.environment, name).toMatchObject({
        NATS_URL: 'nats://nats:4222',
        HOLDFAST_STREAM_REPLICAS: '1',
      });
      expect(cluster[name]?.environment, name).toMatchObject({
        NATS_URL: nodes.map((n) => `nats://${n}:4222`).join(','),
        HOLDFAST_STREAM_REPLICAS: '3',
      });
    }
  });
});
