import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { natsNamesToEnv } from '@holdfast/config';
import { EXAMPLE_CONFIG, REPO_ROOT } from '@holdfast/stack';
import {
  findBinary,
  freePort,
  infraTest,
  startService,
  type ServiceProcess,
} from '@holdfast/testkit';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { dockerfile } from './dockerfile.js';

const run = promisify(execFile);

/** The five images: package folder and the port of its /readyz (HEALTH_PORT). */
const SERVICES = {
  mock: 'infra/mock-upstream',
  authority: 'services/budget-authority',
  aggregator: 'services/billing-aggregator',
  alerter: 'services/alerter',
  edge: 'services/edge',
} as const;
type Name = keyof typeof SERVICES;

/** Every file below `dir`, relative to it. */
function files(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(dir, join(prefix, e.name)) : [join(prefix, e.name)],
  );
}

describe('infra/docker/Dockerfile', () => {
  const df = dockerfile();
  const args = (op: string) => df.instructions.filter((i) => i.op === op).map((i) => i.args);

  it('copies only what exists in the build context, and keeps host builds out of it', () => {
    expect(df.contextSources).toEqual([
      'pnpm-lock.yaml',
      'pnpm-workspace.yaml',
      '.npmrc',
      '.pnpmfile.cjs',
      '.',
    ]);
    for (const src of df.contextSources)
      expect(existsSync(resolve(REPO_ROOT, src)), src).toBe(true);
    const ignored = readFileSync(resolve(REPO_ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['**/node_modules', '**/dist', '**/.tsbuild', '.git'])
      expect(ignored).toContain(p);
    // The runtime folder is made by the script the layout test below runs too.
    expect(args('RUN')).toContain('sh infra/docker/deploy.sh "${SERVICE}" /out');
    expect(existsSync(resolve(REPO_ROOT, 'infra/docker/deploy.sh'))).toBe(true);
  });

  it('installs the pinned pnpm, runs as the node user in production mode, and starts dist/main.js', () => {
    const pinned = (
      JSON.parse(readFileSync(resolve(REPO_ROOT, 'package.json'), 'utf8')) as {
        packageManager: string;
      }
    ).packageManager;
    expect(args('RUN')).toContain(`npm install -g ${pinned}`);
    expect(df.instructions.filter((i) => i.op === 'FROM').map((i) => i.args)).toEqual([
      '${NODE_IMAGE} AS build',
      '${NODE_IMAGE} AS runtime',
    ]);
    expect(args('USER')).toEqual(['node']);
    expect(args('ENV').join(' ')).toContain('NODE_ENV=production');
    expect(args('CMD')).toEqual(['["node", "dist/main.js"]']);
    expect(df.healthcheck.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
  });

  it('its HEALTHCHECK command fails while nothing answers on HEALTH_PORT', async () => {
    const port = await freePort();
    const probe = spawnSync(process.execPath, df.healthcheck.slice(2), {
      env: { HEALTH_PORT: String(port) },
    });
    expect(probe.status).toBe(1);
  });
});

/**
 * The runtime stage's /app, rebuilt on the host with the Dockerfile's own step
 * (infra/docker/deploy.sh), then every service started from its folder with
 * NODE_ENV=production, probed with the image's HEALTHCHECK, and one call made through it.
 */
infraTest(
  'the deployed folder layout of every image runs: ready, healthy, and serving a call',
  async ({
    natsUrl,
    redisUrl,
    clickhouseUrl,
    iso,
    nc: _cleansNats,
    redis: _cleansRedis,
    clickhouse: _cleansClickHouse,
  }) => {
    if (!findBinary('pnpm')) throw new Error('pnpm is not on PATH: npm i -g pnpm@12.21.0');
    const root = await mkdtemp(join(tmpdir(), 'holdfast-image-'));
    const procs: ServiceProcess[] = [];
    try {
      const out = (name: Name) => join(root, name);
      for (const name of Object.keys(SERVICES) as Name[]) {
        await run('sh', ['infra/docker/deploy.sh', SERVICES[name], out(name)], { cwd: REPO_ROOT });
      }
      for (const name of Object.keys(SERVICES) as Name[]) {
        const listed = files(out(name)).filter((f) => !f.startsWith('node_modules/'));
        expect(listed, name).toContain('dist/main.js');
        expect(
          listed.filter((f) => /\.ts$/.test(f) && !f.endsWith('.d.ts')),
          `${name}: no TypeScript sources`,
        ).toEqual([]);
        expect(
          listed.some((f) => f.startsWith('test/') || f.startsWith('bench/')),
          name,
        ).toBe(false);
      }
      // Runtime assets read from beside dist/: the authority's Lua, the aggregator's SQL.
      const lua = readdirSync(resolve(REPO_ROOT, SERVICES.authority, 'src/lua'));
      expect(readdirSync(join(out('authority'), 'src/lua')).sort()).toEqual(lua.sort());
      const sql = readdirSync(resolve(REPO_ROOT, SERVICES.aggregator, 'migrations'));
      expect(readdirSync(join(out('aggregator'), 'migrations')).sort()).toEqual(sql.sort());

      const ports = {
        mock: await freePort(),
        authority: await freePort(),
        aggregator: await freePort(),
        alerter: await freePort(),
        edge: await freePort(),
      };
      const common = { NODE_ENV: 'production', NATS_URL: natsUrl, ...natsNamesToEnv(iso.names) };
      const env: Record<Name, Record<string, string>> = {
        mock: { MOCK_UPSTREAM_PORT: String(ports.mock), MOCK_UPSTREAM_HOST: '127.0.0.1' },
        authority: {
          ...common,
          REDIS_URL: redisUrl,
          HOLDFAST_KEY_PREFIX: iso.keyPrefix,
          HOLDFAST_CONFIG: EXAMPLE_CONFIG,
          AUTHORITY_OPS_PORT: String(ports.authority),
        },
        aggregator: {
          ...common,
          CLICKHOUSE_URL: clickhouseUrl,
          CLICKHOUSE_DATABASE: iso.database,
          BILLING_AGGREGATOR_OPS_PORT: String(ports.aggregator),
        },
        alerter: { ...common, ALERTER_OPS_PORT: String(ports.alerter) },
        edge: {
          ...common,
          EDGE_PORT: String(ports.edge),
          EDGE_HOST: '127.0.0.1',
          OPENAI_BASE_URL: `http://127.0.0.1:${ports.mock}/v1`,
        },
      };
      for (const name of Object.keys(SERVICES) as Name[]) {
        procs.push(await startService(join(out(name), 'dist/main.js'), env[name]));
        const probe = spawnSync(process.execPath, dockerfile().healthcheck.slice(2), {
          env: { HEALTH_PORT: String(ports[name]) },
        });
        expect(probe.status, `HEALTHCHECK of ${name}`).toBe(0);
      }

      const openai = new OpenAI({
        baseURL: `http://127.0.0.1:${ports.edge}/v1`,
        apiKey: 'sk-hf-demo-support-bot',
        maxRetries: 0,
      });
      const reply = await openai.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'Hello' }],
      });
      expect(reply.usage?.completion_tokens).toBeGreaterThan(0);

      // `docker stop` sends SIGTERM: every process drains and exits 0.
      for (const p of procs.reverse()) {
        await p.stop();
        expect(await p.exited).toBe(0);
      }
    } finally {
      for (const p of procs) await p.stop();
      await rm(root, { recursive: true, force: true });
    }
  },
);
