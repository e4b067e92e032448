import { PassThrough } from 'node:stream';
import { expect, test } from 'vitest';
import { WriteBatch } from './write-batch.js';

test('what is written between flushes leaves as one chunk, bytes and order unchanged', async () => {
  const pass = new PassThrough();
  const chunks: string[] = [];
  pass.on('data', (c: Buffer) => chunks.push(c.toString()));
  const out = new WriteBatch(pass);
  out.write('data: 1\n\n');
  out.write('data: é\n\n');
  out.flush();
  out.flush(); // nothing pending: no empty write
  out.write('data: 3\n\n');
  out.write('data: [DONE]\n\n');
  out.end();
  await new Promise((resolve) => pass.on('end', resolve));
  expect(chunks).toEqual(['data: 1\n\ndata: é\n\n', 'data: 3\n\ndata: [DONE]\n\n']);
});
