import { Writable } from 'node:stream';
import { pino } from 'pino';
import { expect, test } from 'vitest';
import { REDACT_PATHS } from './logger.js';

test('keys never reach a log line: Bearer tokens and Anthropic-style x-api-key headers', () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const log = pino({ redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
  log.info(
    { headers: { authorization: 'Bearer sk-1', 'x-api-key': 'sk-2', accept: 'x' } },
    'upstream request',
  );
  log.info({ req: { headers: { 'x-api-key': 'sk-3' } } }, 'request');
  const text = lines.join('');
  for (const secret of ['sk-1', 'sk-2', 'sk-3']) expect(text).not.toContain(secret);
  expect(JSON.parse(lines[0]!)).toMatchObject({ headers: { accept: 'x' } });
});
