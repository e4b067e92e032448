import { execFile, spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import { natsNamesToEnv } from '@holdfast/config';
import { sha256Hex, startEdge } from '@holdfast/edge';
import { startMockUpstream } from '@holdfast/mock-upstream';
import { AuthorityClient } from '@holdfast/runtime';
import { chatCall, infraTest } from '@holdfast/testkit';

export const ADMIN_TOKEN = 'hf-cli-test-admin-token-93ad';
export const TEAM_KEY = 'sk-hf-cli-team-key';
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
/** A stack dir that never exists: the tests' holdfast finds no local stack unless told. */
const NO_STACK = join(tmpdir(), 'holdfast-cli-test-no-stack');

/** A config document: one team with a budget, a use case and a key. */
export function teamConfig(upstreamUrl: string, limit = 40_000) {
  return {
    upstreams: [{ id: 'default', baseUrl: upstreamUrl }],
    models: [
      {
        id: 'gpt-4o-mini',
        upstream: 'default',
        tokenizer: 'o200k_base',
        price: { inputPerMTok: 0.15, outputPerMTok: 0.6 },
      },
    ],
    tenants: [
      {
        id: 'team',
        budgets: [{ window: 'month', limit }],
        useCases: [{ id: 'UC-1', maxTokens: 64, models: ['gpt-4o-mini'] }],
        keys: [{ id: 'team-1', sha256: sha256Hex(TEAM_KEY) }],
      },
    ],
  };
}

export interface CliStack {
  url: string;
  upstreamUrl: string;
  authority: AuthorityClient;
  /** What `holdfast events` needs to find the test's stream. */
  eventsEnv: Record<string, string>;
}

/** A small chat call through the edge with a key: its status and reservation id. */
export const chat = (s: CliStack, key: string) => chatCall(s.url, key);

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment of a test's holdfast: none of the caller's HOLDFAST_*, no local stack. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('HOLDFAST_')),
  );
  return { ...clean, HOLDFAST_STACK_DIR: NO_STACK, ...env };
}

/** Runs the built `holdfast` binary as a child process. */
export function holdfast(args: string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { env: childEnv(env) }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A `holdfast` that keeps running (`events` following): its lines so far, and Ctrl-C. */
export function spawnHoldfast(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [MAIN, ...args], { env: childEnv(env) });
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return {
    lines,
    interrupt: () => {
      child.kill('SIGINT');
      return exited;
    },
  };
}

/** infraTest plus a real edge (admin API on) and authority, on the test's isolated names. */
export const cliTest = infraTest.extend<{ stack: CliStack }>({
  stack: async ({ nc, natsUrl, redisUrl, iso }, use) => {
    const upstream = await startMockUpstream({ port: 0 });
    // The real clock and the service's default sweep and relay lease.
    const authority = await startTestAuthority({
      natsUrl,
      redisUrl,
      nc,
      names: iso.names,
      keyPrefix: iso.keyPrefix,
      config: teamConfig(upstream.url),
      clock: false,
      sweepIntervalMs: 1_000,
      relayLeaseMs: 5_000,
    });
    const edge = await startEdge({ nc, names: iso.names, options: { adminToken: ADMIN_TOKEN } });
    await use({
      url: edge.url,
      upstreamUrl: upstream.url,
      authority: new AuthorityClient({ nc, names: iso.names }),
      eventsEnv: { NATS_URL: natsUrl, ...natsNamesToEnv(iso.names) },
    });
    await edge.stop();
    await authority.stop();
    await upstream.stop();
  },
});
