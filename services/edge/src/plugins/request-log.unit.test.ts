import { Writable } from 'node:stream';
import { REDACT_PATHS } from '@holdfast/runtime';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { expect, test } from 'vitest';
import { requestLogFactory, RequestLog } from './request-log.js';

/** A logger as the services' (redaction on), its lines kept, the children it made counted. */
function logger(level = 'info') {
  const lines: string[] = [];
  const children: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().trim().split('\n'));
      done();
    },
  });
  // fastify's own pino (the edge has no pino of its own to import), as the services' logger.
  const { log } = Fastify({
    logger: {
      level,
      base: { pid: 1 },
      timestamp: false,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      // The children made for requests (fastify makes others of its own at start).
      onChild: (child) => {
        if ('reqId' in child.bindings()) children.push(child.bindings());
      },
      stream: sink,
    },
  });
  return { log, lines, children };
}

const BOOM = new Error('boom');

/** Every way the edge and fastify write through a request's logger. */
function writeThrough(log: FastifyBaseLogger) {
  log.debug({ below: 'the level' }, 'not written');
  log.info({ tenant: 'team', apiKey: 'sk-secret' }, 'a line');
  log.warn('a %s line', 'formatted');
  log.error({ err: BOOM, headers: { authorization: 'Bearer sk-x' } }, 'an error');
  log.child({ part: 'lease' }).warn({ token: 'tok' }, 'a child line');
  log.level = 'debug';
  log.debug({ now: 'written' }, 'debug on');
}

test('lines through a RequestLog are the lines of the child fastify would have made, to the byte', () => {
  const eager = logger();
  const lazy = logger();
  writeThrough(eager.log.child({ reqId: 'r-1' }, {}));
  writeThrough(requestLogFactory(lazy.log, { reqId: 'r-1' }, {}));
  expect(lazy.lines).toHaveLength(5);
  expect(lazy.lines).toEqual(eager.lines);
  expect(lazy.lines.join('\n')).not.toMatch(/sk-secret|sk-x|"tok"/);
  for (const line of lazy.lines) expect(JSON.parse(line)).toMatchObject({ reqId: 'r-1' });
});

test('a request that writes no line, or only lines below the level, makes no child logger', () => {
  const { log, children } = logger();
  const requestLog = requestLogFactory(log, { reqId: 'r-2' }, {});
  requestLog.debug({ x: 1 }, 'below the level');
  requestLog.trace('below too');
  requestLog.silent('never written');
  expect(requestLog.level).toBe('info');
  expect(children).toEqual([]);
  requestLog.info('written');
  requestLog.warn('written too');
  expect(children).toEqual([{ reqId: 'r-2' }]);
});

test("a route's own level or serializers get their child at once, as fastify's factory gives it", () => {
  const { log, lines } = logger();
  const child = requestLogFactory(log, { reqId: 'r-3' }, { level: 'debug' });
  expect(child).not.toBeInstanceOf(RequestLog);
  child.debug('debug at the route level');
  expect(JSON.parse(lines[0]!)).toMatchObject({ reqId: 'r-3', msg: 'debug at the route level' });
});

test('through fastify: request.log writes with its reqId, and a request without a line made no child', async () => {
  const { log, lines, children } = logger();
  const app = Fastify({
    loggerInstance: log,
    childLoggerFactory: requestLogFactory,
    disableRequestLogging: true,
    genReqId: () => 'req-a',
  });
  app.get('/quiet', () => ({ ok: true }));
  app.get('/loud', (request) => {
    request.log.warn({ apiKey: 'sk-in-route' }, 'from the route');
    return { ok: true };
  });
  expect((await app.inject({ url: '/quiet' })).statusCode).toBe(200);
  expect(children).toEqual([]);
  expect((await app.inject({ url: '/loud' })).statusCode).toBe(200);
  await app.close();
  expect(children).toEqual([{ reqId: 'req-a' }]);
  const line = lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === 'from the route');
  expect(line).toMatchObject({ reqId: 'req-a', apiKey: '[redacted]', level: 40 });
});
