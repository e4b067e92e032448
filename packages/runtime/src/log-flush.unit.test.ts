import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, expect, test } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import { LazyFlush } from './log-flush.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function buffered(delayMs: number) {
  const dir = await mkdtemp(join(tmpdir(), 'log-flush-'));
  dirs.push(dir);
  const file = join(dir, 'log');
  const dest = pino.destination({ dest: file, sync: false, minLength: 4096 });
  await new Promise((resolve) => dest.once('ready', resolve));
  const flush = new LazyFlush(dest, delayMs);
  const log = pino({ base: null, timestamp: false, hooks: { streamWrite: flush.line } }, dest);
  return { log, flush, dest, text: () => readFile(file, 'utf8') };
}

test('a line below the block size is written after the delay, and then no flush is due', async () => {
  const { log, flush, dest, text } = await buffered(50);
  expect(flush.idle).toBe(true);
  log.info('one');
  log.child({ c: 1 }).info('two');
  expect(flush.idle).toBe(false);
  expect(await text()).toBe('');
  await waitFor(async () => (await text()).split('\n').length === 3, { timeoutMs: 2_000 });
  await waitFor(() => flush.idle, { timeoutMs: 2_000 });
  expect(
    (await text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string })
      .map((l) => l.msg),
  ).toEqual(['one', 'two']);
  dest.destroy();
});

test('lines logged while a write is in flight are written too', async () => {
  const { log, flush, dest, text } = await buffered(20);
  // Over minLength: written at once, and the lines after it land behind that write.
  log.info('x'.repeat(5_000));
  for (let i = 0; i < 20; i++) log.info(`after ${i}`);
  await waitFor(async () => (await text()).includes('after 19'), { timeoutMs: 2_000 });
  await waitFor(() => flush.idle, { timeoutMs: 2_000 });
  dest.destroy();
});
