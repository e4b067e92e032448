import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readAdminToken } from '@holdfast/config';
import { afterEach, describe, expect, it } from 'vitest';
import { stackAdminToken } from './admin-token.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('stackAdminToken', () => {
  it('makes a token on the first start, only the owner can read it, and keeps it after', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'holdfast-admin-token-'));
    dirs.push(dir);
    const first = await stackAdminToken(dir, undefined);
    expect(first.token).toMatch(/^hf-admin-[A-Za-z0-9_-]{43}$/);
    expect(first.file).toBe(join(dir, 'admin-token'));
    expect((await stat(first.file!)).mode & 0o777).toBe(0o600);
    expect(readAdminToken(dir)).toBe(first.token);
    expect(await stackAdminToken(dir, undefined)).toEqual(first);
  });

  it('takes EDGE_ADMIN_TOKEN when it is set, and writes nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'holdfast-admin-token-'));
    dirs.push(dir);
    expect(await stackAdminToken(dir, 'my-own-admin-token-1234')).toEqual({
      token: 'my-own-admin-token-1234',
      file: undefined,
    });
    expect(readAdminToken(dir)).toBeUndefined();
  });
});
