import type { Socket } from 'node:net';
import { Client } from 'undici';
import { expect } from 'vitest';
import { chatBody, content, DONE, finish, stream, usage } from './chat-chunks.js';
import { edgeTest as test, KEYS, type Stack } from './harness.js';
import { scriptedStack } from './scripted-upstream.js';

/**
 * The socket writes of a streamed reply (issue 14: every write to the client is a system call
 * that wakes it). What the edge writes in one turn of the event loop leaves in one write, the
 * bytes unchanged; nothing waits past the turn.
 */

const USAGE = usage({ prompt_tokens: 30, completion_tokens: 3, total_tokens: 33 });

/** Every write the edge makes on the next connection a client opens to it. */
function nextConnectionWrites(s: Stack): string[] {
  const writes: string[] = [];
  s.edge.app.server.once('connection', (socket: Socket) => {
    const write = socket._write.bind(socket);
    const writev = socket._writev!.bind(socket);
    socket._write = (c: Buffer | string, e, cb) => {
      writes.push(String(c));
      write(c, e, cb);
    };
    socket._writev = (cs, cb) => {
      writes.push(cs.map((c) => String(c.chunk)).join(''));
      writev(cs, cb);
    };
  });
  return writes;
}

/** A streamed chat call on a connection of its own: its status and text. */
async function streamed(s: Stack): Promise<{ status: number; text: string }> {
  const client = new Client(s.edge.url);
  const res = await client.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.support}` },
    body: chatBody(true),
  });
  const text = await res.body.text();
  await client.close();
  return { status: res.statusCode, text };
}

test('a streamed reply leaves in one socket write a read of the upstream: head, events, [DONE] and the body end together; a later read when it comes', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack);
  try {
    const whole = [...content(3), finish(), USAGE, DONE].join('');
    // The upstream sends it all at once: one write, the whole response.
    stream(up, (res) => res.end(whole));
    let writes = nextConnectionWrites(s);
    let r = await streamed(s);
    expect(r).toEqual({ status: 200, text: whole });
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(writes[0]!.endsWith('\r\ndata: [DONE]\n\n\r\n0\r\n\r\n')).toBe(true);

    // The upstream sends two content chunks, and the rest only once they reached the client.
    let sendRest = () => undefined as unknown;
    stream(up, (res) => {
      res.write(content(2).join(''));
      sendRest = () => res.end([...content(1), finish(), USAGE, DONE].join(''));
    });
    writes = nextConnectionWrites(s);
    const call = streamed(s);
    await expect.poll(() => writes.length, { timeout: 20_000 }).toBe(1);
    expect(writes[0]!.split(' budget').length - 1).toBe(2);
    sendRest();
    r = await call;
    expect(r).toEqual({ status: 200, text: whole });
    // One write a read of the upstream: the last one's events, [DONE] and the body end together.
    expect(writes).toHaveLength(2);
    expect(writes[1]!.endsWith('\r\ndata: [DONE]\n\n\r\n0\r\n\r\n')).toBe(true);
    await s.settled('support-bot');
  } finally {
    await up.stop();
  }
});
