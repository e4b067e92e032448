import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSettings } from './env.js';
import { ProcessGroup } from './process.js';
import { startStack } from './stack.js';
import { writeStackState, type StackState } from './state.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function stateIn(runnerPid: number, processes: StackState['processes']): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-stack-state-'));
  dirs.push(dir);
  const url = 'http://127.0.0.1:1';
  await writeStackState(dir, {
    pid: runnerPid,
    startedAt: new Date().toISOString(),
    urls: {
      edge: url,
      mock: url,
      nats: url,
      redis: url,
      clickhouse: url,
      authorityOps: url,
      aggregatorOps: url,
      alerterOps: url,
    },
    clickhouseDatabase: 'holdfast',
    natsNames: {},
    configPath: 'x.yaml',
    processes,
  });
  return dir;
}

/** The pid of a process that has already exited. */
function deadPid(): number {
  return spawnSync('true').pid;
}

describe('startStack', () => {
  it('refuses to start a second stack on the same data dir', async () => {
    const dir = await stateIn(process.pid, []);
    const group = new ProcessGroup(() => undefined);
    await expect(startStack(loadSettings({ HOLDFAST_STACK_DIR: dir }), group)).rejects.toThrow(
      `a stack already runs from ${dir} (runner pid ${process.pid})`,
    );
    expect(group.processes).toEqual([]);
  });

  it('names the processes a killed runner left behind instead of fighting them for ports', async () => {
    const dir = await stateIn(deadPid(), [
      { name: 'nats', pid: deadPid() },
      { name: 'redis', pid: process.pid },
    ]);
    await expect(
      startStack(loadSettings({ HOLDFAST_STACK_DIR: dir }), new ProcessGroup(() => undefined)),
    ).rejects.toThrow(`left redis (pid ${process.pid}) running: stop them (kill ${process.pid})`);
  });

  it('takes --cluster from the command line and a Redis node list from REDIS_URL', () => {
    expect(loadSettings({}, ['--cluster']).cluster).toBe(true);
    expect(loadSettings({}, []).cluster).toBe(false);
    const nodes = 'redis://127.0.0.1:7000,redis://127.0.0.1:7001';
    expect(loadSettings({ REDIS_URL: nodes }, []).env.REDIS_URL).toBe(nodes);
  });
});

describe('pnpm stack --cluster', () => {
  it('is the flag or HOLDFAST_STACK_CLUSTER; a plain run is not a cluster', () => {
    expect(loadSettings({}, []).cluster).toBe(false);
    expect(loadSettings({}, ['--cluster']).cluster).toBe(true);
    expect(loadSettings({ HOLDFAST_STACK_CLUSTER: 'true' }, []).cluster).toBe(true);
  });
});
