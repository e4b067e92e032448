import { Writable } from 'node:stream';
import { REDACT_PATHS } from '@holdfast/runtime';
import Fastify from 'fastify';
import { Registry } from 'prom-client';
import { expect, test } from 'vitest';
import '../types.js';
import { observabilityPlugin } from './observability.js';

const SECRETS = {
  bearer: 'sk-hf-bearer-secret-1a2b',
  xApiKey: 'sk-hf-x-api-key-secret-3c4d',
  inBody: 'sk-provider-in-body-5e6f',
  inAudit: 'sk-stray-in-audit-7a8b',
};

/** The edge's observability plugin on a logger configured as the services' (redaction on). */
async function appWithLines() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().trim().split('\n'));
      done();
    },
  });
  const app = Fastify({
    logger: { redact: { paths: REDACT_PATHS, censor: '[redacted]' }, stream: sink },
  });
  await app.register(observabilityPlugin, { registry: new Registry(), checks: [] });
  app.post('/v1/chat/completions', (request) => {
    Object.assign(request.audit, { tenant: 'team', keyId: 'k1', model: 'gpt-4o-mini' });
    Object.assign(request.audit, { promptTokens: 12, completionTokens: 3, outcome: 'completed' });
    // A field set outside Audit (a future bug) is not written: the line's fields are known.
    Object.assign(request.audit, { apiKey: SECRETS.inAudit, headers: request.headers });
    return { ok: true };
  });
  return { app, lines: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

test('the summary line carries its known fields only: no Authorization, x-api-key or body value reaches it', async () => {
  const { app, lines } = await appWithLines();
  const res = await app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${SECRETS.bearer}`, 'x-api-key': SECRETS.xApiKey },
    payload: { model: 'gpt-4o-mini', api_key: SECRETS.inBody, apiKey: SECRETS.inBody },
  });
  expect(res.statusCode).toBe(200);
  await app.close();
  const text = JSON.stringify(lines());
  for (const secret of Object.values(SECRETS)) expect(text).not.toContain(secret);
  const summary = lines().find((l) => l.msg === 'request');
  expect(summary).toMatchObject({
    reqId: res.headers['x-request-id'],
    method: 'POST',
    route: '/v1/chat/completions',
    status: 200,
    tenant: 'team',
    keyId: 'k1',
    model: 'gpt-4o-mini',
    promptTokens: 12,
    completionTokens: 3,
    outcome: 'completed',
  });
  const fields = Object.keys(summary!).filter(
    (k) => !['level', 'time', 'pid', 'hostname'].includes(k),
  );
  expect(fields.sort()).toEqual(
    [
      'reqId',
      'method',
      'route',
      'status',
      'ms',
      'tenant',
      'keyId',
      'model',
      'promptTokens',
      'completionTokens',
      'outcome',
      'msg',
    ].sort(),
  );
});

test('other lines keep the redaction: a request logger still blanks keys', async () => {
  const { app, lines } = await appWithLines();
  app.get('/v1/log', (request) => {
    request.log.warn({ headers: request.headers, apiKey: SECRETS.inAudit }, 'upstream request');
    return {};
  });
  await app.inject({
    method: 'GET',
    url: '/v1/log',
    headers: { authorization: `Bearer ${SECRETS.bearer}`, 'x-api-key': SECRETS.xApiKey },
  });
  await app.close();
  const text = JSON.stringify(lines());
  for (const secret of Object.values(SECRETS)) expect(text).not.toContain(secret);
  expect(lines().find((l) => l.msg === 'upstream request')).toMatchObject({
    apiKey: '[redacted]',
    headers: { authorization: '[redacted]', 'x-api-key': '[redacted]' },
  });
});
