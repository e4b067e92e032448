import { fileURLToPath } from 'node:url';
import { startService } from '@holdfast/testkit';
import { describe, expect, it } from 'vitest';

// The built entry (tests run after `tsc -b`).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

describe('main.ts', () => {
  it('starts from the environment, logs ready, serves, and stops on SIGTERM', async () => {
    const service = await startService(MAIN, {
      MOCK_UPSTREAM_PORT: '0',
      MOCK_UPSTREAM_HOST: '127.0.0.1',
      MOCK_UPSTREAM_API_KEY: 'sk-main',
      MOCK_UPSTREAM_COMPLETION: 'fixed:4',
    });
    try {
      const ready = JSON.parse(service.lines.find((l) => l.includes('"msg":"ready"'))!) as {
        url: string;
      };
      const res = await fetch(`${ready.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-main' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(await res.json()).toMatchObject({ usage: { completion_tokens: 4 } });
    } finally {
      await service.stop();
    }
    expect(await service.exited).toBe(0);
  });

  it('refuses a malformed environment, naming the variable', async () => {
    await expect(
      startService(MAIN, { MOCK_UPSTREAM_PORT: '0', MOCK_UPSTREAM_COMPLETION: 'sometimes' }),
    ).rejects.toThrow(/MOCK_UPSTREAM_COMPLETION/);
  });
});
