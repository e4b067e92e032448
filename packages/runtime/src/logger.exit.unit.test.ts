import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const RUNTIME = fileURLToPath(new URL('../dist/index.js', import.meta.url));
const LINES = 3_000;

/**
 * A process with the services' logger that logs LINES lines of 300 bytes (about 70 blocks,
 * most still buffered or being written), tells stderr, then ends as `end` says. Resolves its
 * exit code and the lines it wrote to stdout.
 */
async function logThenEnd(end: 'sigterm' | 'crash' | 'exit') {
  const script = `
    import { createLogger, handleShutdown } from ${JSON.stringify(RUNTIME)};
    const logger = createLogger({ name: 'exit-test' });
    handleShutdown(logger, [], 5_000);
    for (let i = 0; i < ${LINES}; i++) logger.info({ i, pad: 'x'.repeat(200) }, 'line');
    process.stderr.write('logged\\n');
    if (${JSON.stringify(end)} === 'crash') setImmediate(() => { throw new Error('boom'); });
    if (${JSON.stringify(end)} === 'exit') process.exit(3);
    setInterval(() => {}, 1_000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    err += s;
    if (end === 'sigterm' && s.includes('logged')) child.kill('SIGTERM');
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  if (!child.stdout.readableEnded) await once(child.stdout, 'end');
  const lines = out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg: string; i?: number });
  return { code, lines, err };
}

test.each(['sigterm', 'crash', 'exit'] as const)(
  'every buffered log line is written, in order, when the process ends (%s)',
  async (end) => {
    const { code, lines } = await logThenEnd(end);
    expect(code).toBe({ sigterm: 0, crash: 1, exit: 3 }[end]);
    const logged = lines.filter((l) => l.msg === 'line').map((l) => l.i);
    expect(logged).toEqual(Array.from({ length: LINES }, (_, i) => i));
    if (end === 'sigterm') expect(lines.at(-1)?.msg).toBe('shutting down');
  },
);
