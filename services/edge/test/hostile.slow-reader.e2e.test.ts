import { connect, type Socket } from 'node:net';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  chat,
  edgeTest as test,
  entry,
  KEYS,
  openBodyBytes,
  tenantMetric,
  UNREAD_AT_HANGUP,
  type Stack,
  type StackOptions,
} from './harness.js';
import { chunk, content, stream } from './chat-chunks.js';
import { scriptedStack } from './scripted-upstream.js';

/**
 * A client that stops reading its stream. The provider bills every token it writes, read or
 * not, and a token left unread in the connection when the call ends is billed by the provider
 * and not by Holdfast. The edge used to stop reading the upstream while the client's stream was
 * full (backpressure), so the upstream's tokens piled up unread between them, and when the
 * client then hung up the edge billed only what it had read: the client chose how much of its
 * reply went unbilled (1,596 of 16,012 tokens here, and a real provider goes on generating).
 * Now the edge reads every upstream at its own pace and keeps what the client has not taken;
 * a client more than EDGE_STREAM_LAG_BYTES behind is closed (call/pump.ts).
 */

/** Sends a streaming chat call on a raw socket that never reads its answer. */
function neverReads(s: Stack, maxTokens: number): Socket {
  const url = new URL(s.edge.url);
  const body = JSON.stringify({ ...chat(5), max_tokens: maxTokens, stream: true });
  const socket = connect(Number(url.port), url.hostname, () => {
    socket.write(
      'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n' +
        `Authorization: Bearer ${KEYS.support}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // Reads nothing: its socket's buffers fill, then the edge's stream to it.
    socket.pause();
  });
  socket.on('error', () => undefined);
  return socket;
}

/**
 * A token delay under a timer's 1 ms (the mock sleeps 1 ms every 10 tokens, and gives each token
 * a turn of the event loop): the socket buffers between the edge and a client that reads
 * nothing fill within seconds. At 1 ms a token (a timer each, several ms each on a loaded box)
 * filling them ran out a 90 s wait.
 */
const FAST_PACE_MS = 0.1;

/**
 * The upstream's whole-call deadline for these long replies: past any wait here, so it never
 * ends a reply the provider is still writing. The stack's (UPSTREAM_TIMEOUT_MS, 30 s) did, on a
 * starved box: at load 25-35 the mock, which shares this process's event loop with the edge,
 * wrote 710 tokens in those 30 s, far from filling the socket buffers, and the edge ended the
 * call as an upstream timeout, not a slow client (3 of 5 runs of the tenant-bound test). An
 * upstream that stops writing is still cut by the edge's idle timeout (60 s).
 */
const LONG_REPLY_DEADLINE_MS = 600_000;

/** A stack whose model replies `tokens` tokens, `tokenDelayMs` apart, to a team that may ask them. */
function longReplies(tokens: number, tokenDelayMs: number): StackOptions {
  return {
    behaviour: { tokenDelayMs, completion: { mode: 'fixed', tokens } },
    patch: (c) => {
      entry(c.upstreams, 'default').timeoutMs = LONG_REPLY_DEADLINE_MS;
      const team = entry(c.tenants, 'support-bot');
      team.budgets = [{ window: 'month', limit: 10_000_000, unit: 'tokens' }];
      (team.useCases as Array<{ maxTokens: number }>)[0]!.maxTokens = tokens;
    },
  };
}

/** Edge options: no bound on a client's lag but its tenant's open bytes (`tenantBodyBytes`). */
function lagUnbounded(tenantBodyBytes: number) {
  return {
    streamLagBytes: 256 * 1024 * 1024,
    openBodies: { tenantBodyBytes, bodyBytes: 512 * 1024 * 1024 },
  };
}

/**
 * How long a slow client's close (or the settle of a reply the edge read whole) is waited for:
 * a guard against a hang, not a speed this file asserts. How soon the close comes is the provider's pace, and the mock's pace is the box's:
 * at load 25-35 it wrote 24 tokens a second, and a close needs the socket buffers (0.5 MB and
 * more) filled first.
 */
const CLOSE_WAIT_MS = 240_000;

/**
 * Waits for the edge to close its slow client (the client's socket is paused: it would not see
 * the close), as long as the provider is still writing its reply: a call the mock saw end
 * without that close (the reply written in full and kept, an upstream error) fails at once,
 * with how it ended.
 */
async function closedSlow(s: Stack): Promise<void> {
  const closed = async () =>
    (await tenantMetric(s, 'edge_slow_clients_total', 'support-bot')) === 1;
  const how = await waitFor(
    async () => {
      if (await closed()) return 'closed';
      const ended = s.upstream.stats().recent.at(-1);
      // The close is counted before the edge hangs up: looked at again once the call ended.
      if (ended)
        return (await closed()) ? 'closed' : `${ended.outcome} (${ended.failure ?? 'no failure'})`;
      return undefined;
    },
    { what: 'the edge to close the slow client', timeoutMs: CLOSE_WAIT_MS, intervalMs: 250 },
  );
  expect(how, 'how the call ended').toBe('closed');
}

/** A client that reads is served a short stream in full. */
async function servedInFull(s: Stack): Promise<void> {
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 20 }, tokenDelayMs: 0 });
  const ok = await fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.support}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...chat(5), max_tokens: 20, stream: true }),
  });
  expect(ok.status).toBe(200);
  expect(await ok.text()).toContain('[DONE]');
}

/** What the team was billed is what the provider billed, less at most a hangup's residual. */
async function billedAsProvider(s: Stack): Promise<void> {
  const u = await s.settled('support-bot');
  const billed = s.upstream.stats().billed;
  const provider = billed.promptTokens + billed.completionTokens;
  expect(u.windows[0]!.used).toBeLessThanOrEqual(provider);
  expect(u.windows[0]!.used).toBeGreaterThanOrEqual(provider - UNREAD_AT_HANGUP);
  expect(u.windows[0]!.held).toBe(0);
  expect(u.inFlight).toBe(0);
}

test(
  'a client that reads nothing of its stream, then hangs up, is billed what the provider billed (within the unread residual of a hangup)',
  async ({ stack }) => {
    const s = await stack(longReplies(16_000, 0));
    const socket = neverReads(s, 16_000);
    // The edge reads the whole reply whatever the client does, and settles the call once it has
    // (the reply then waits on the edge for the client); with the old backpressure this mock,
    // which waits for its socket to drain, stopped part way and the call never settled. The
    // hangup comes after that settle, not once the provider has stopped writing: on a starved box
    // the edge was still 2,122 tokens behind a provider that had written all (billed 13,890 of
    // 16,012, left unread between them), a lag of the box, not a choice of the client.
    await waitFor(
      async () => ((await s.settled('support-bot')).windows[0]!.used > 0 ? true : undefined),
      { what: 'the edge to read the whole reply and settle the call', timeoutMs: CLOSE_WAIT_MS },
    );
    socket.destroy();
    await billedAsProvider(s);
  },
  CLOSE_WAIT_MS + 60_000,
);

test(
  'a client further behind than EDGE_STREAM_LAG_BYTES is closed: the call ends billed what the provider wrote, nothing held, and another call is served',
  async ({ stack }) => {
    // A fast provider's pace (10 tokens a ms at most, each in a turn of its own: the edge keeps
    // up with it), a reply far longer than the socket buffers between the edge and a client that
    // reads nothing (up to 4 MB: 30,000 tokens), and the least lag.
    const s = await stack({
      ...longReplies(200_000, FAST_PACE_MS),
      edge: { options: { streamLagBytes: 64 * 1024 } },
    });
    const socket = neverReads(s, 200_000);
    await closedSlow(s);
    socket.destroy();
    // Cut well before the end of its reply, at the provider's pace: the unread residual of any
    // hangup, no more.
    expect(s.upstream.stats().billed.completionTokens).toBeLessThan(200_000);
    await billedAsProvider(s);
    // A client that reads is served in full.
    await servedInFull(s);
  },
  CLOSE_WAIT_MS + 60_000,
);

test(
  "a reply left unread counts against its tenant's open bytes on the edge: a client under EDGE_STREAM_LAG_BYTES that fills its tenant's bound is closed",
  async ({ stack }) => {
    // Clients that stop reading could each leave EDGE_STREAM_LAG_BYTES on the edge, as many
    // times as the tenant has connections: the edge's memory for every tenant. What they leave
    // counts with the tenant's open bodies instead. Here one reply (~30 MB, under its lag bound,
    // at a fast provider's pace) would be read whole and kept for a client that reads nothing of it (what the sockets'
    // buffers do not take: 0.5 MB seen), and the tenant's bound is 128 KiB.
    const s = await stack({
      ...longReplies(200_000, FAST_PACE_MS),
      edge: { options: lagUnbounded(128 * 1024) },
    });
    const socket = neverReads(s, 200_000);
    await closedSlow(s);
    socket.destroy();
    await billedAsProvider(s);
    // Everything it kept is let go: the tenant opens calls again (polled as long as the next
    // test's wait: expect.poll's default 1 s is a load flake, not a bound this test sets).
    await expect.poll(() => openBodyBytes(s), { timeout: 15_000, interval: 500 }).toBe(0);
    await servedInFull(s);
  },
  CLOSE_WAIT_MS + 60_000,
);

test('a client that stops reading a reply the edge has finished is closed once it has taken nothing for EDGE_REQUEST_TIMEOUT_MS: its connection and the unread reply are let go', async ({
  stack,
}) => {
  // A reply larger than the sockets' buffers, under every bound on what it may leave on the
  // edge: the call ends (settled) with part of it (0.5 MB here) still waiting for the client.
  // Before, node gave a reply it was still writing no deadline: the connection and those bytes
  // (in the tenant's open bytes) were kept for ever.
  const s = await stack({
    ...longReplies(60_000, 0),
    edge: { options: { ...lagUnbounded(512 * 1024 * 1024), requestTimeoutMs: 2_000 } },
  });
  const socket = neverReads(s, 60_000);
  await s.settled('support-bot');
  await expect.poll(() => openBodyBytes(s), { timeout: 15_000, interval: 500 }).toBe(0);
  socket.destroy();
  await billedAsProvider(s);
  await servedInFull(s);
});

test(
  "an event larger than EDGE_STREAM_LAG_BYTES, waiting in the client's socket, is lag: a client that reads nothing of it is closed",
  async ({ stack }) => {
    // One event of 12 MB (a provider's image or a long tool call comes in one): the edge writes
    // it into the client's socket at once, where what the kernel does not take (~4 MB at most
    // here) waits in the socket's own buffer. Before, the edge looked only at its stream to the
    // socket, empty, so a client that read nothing kept the rest on the edge, far past
    // EDGE_STREAM_LAG_BYTES (1 MiB), as long as its upstream stayed open.
    // No upstream deadline ends the call before the edge sees the lag: on a starved box no close
    // came within 240 s, the stack's 30 s whole-call deadline having ended the call first (the
    // edge was still taking in the 12 MB event; nothing else ends it but the idle timeout).
    const { s, up } = await scriptedStack(stack, 'default', (c) => {
      entry(c.upstreams, 'default').timeoutMs = LONG_REPLY_DEADLINE_MS;
    });
    try {
      const pad = 'x'.repeat(12 * 1024 * 1024);
      stream(up, (res) => {
        res.write(content(1).join(''));
        res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: null }], pad }));
        // The provider goes on generating (slowly): the call stays open.
      });
      const socket = neverReads(s, 100);
      await closedSlow(s);
      socket.destroy();
      const u = await s.settled('support-bot');
      expect(u.windows[0]!.held).toBe(0);
      expect(u.inFlight).toBe(0);
    } finally {
      await up.stop();
    }
  },
  CLOSE_WAIT_MS + 60_000,
);
