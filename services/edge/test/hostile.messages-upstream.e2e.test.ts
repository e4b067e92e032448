import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, type Stack } from './harness.js';
import { responsesEvent as ev, scriptedStack, type ScriptedUpstream } from './scripted-upstream.js';
import { CLAUDE, post, withClaude, words } from './surfaces.js';

/**
 * Red team, Messages streams as no provider means to write them (found by an audit of the
 * Messages surface), from an upstream the test scripts event by event.
 */

/** The prompt count_tokens answers for every call. */
const PROMPT = 30;

/** The word the scripted model writes: one token, and none of the prompt's. */
const WORD = ' zebra';

/**
 * Answers count_tokens with PROMPT and a token for each WORD (the edge counts a reply it has no
 * usage of as the count of its text less that of '.'), every message call with `stream`.
 */
function script(up: ScriptedUpstream, stream: (res: ServerResponse) => void): void {
  up.next((res, body, path) => {
    if (path.endsWith('/count_tokens')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      const words = JSON.stringify(body).split(WORD.trim()).length - 1;
      res.end(JSON.stringify({ input_tokens: PROMPT + words }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    stream(res);
  });
}

/**
 * Answers count_tokens with PROMPT and every message call with `stream`, counting each kind
 * (what reached the upstream).
 */
function counted(
  up: ScriptedUpstream,
  stream: (res: ServerResponse) => void,
): { calls: number; counts: number } {
  const seen = { calls: 0, counts: 0 };
  up.next((res, _body, path) => {
    const counting = path.endsWith('/count_tokens');
    res.writeHead(200, { 'content-type': counting ? 'application/json' : 'text/event-stream' });
    if (counting) {
      seen.counts += 1;
      return void res.end(JSON.stringify({ input_tokens: PROMPT }));
    }
    seen.calls += 1;
    stream(res);
  });
  return seen;
}

const start = (usage: object = { input_tokens: PROMPT, output_tokens: 1 }) =>
  ev('message_start', {
    message: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: CLAUDE,
      content: [],
      stop_reason: null,
      usage,
    },
  });
const text = (n: number) => [
  ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  ...Array.from({ length: n }, () =>
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: WORD } }),
  ),
  ev('content_block_stop', { index: 0 }),
];

const ask = (extra: object = {}) => ({
  model: CLAUDE,
  max_tokens: 100,
  messages: [{ role: 'user', content: words(20) }],
  ...extra,
});
const headersOf = (key: string) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' });

async function call(s: Stack, stream: boolean): Promise<{ status: number; text: string }> {
  const res = await fetch(`${s.edge.url}/v1/messages`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': KEYS.support,
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify({
      model: CLAUDE,
      max_tokens: 100,
      messages: [{ role: 'user', content: words(20) }],
      stream,
    }),
  });
  return { status: res.status, text: await res.text() };
}

test('the connection lost after message_delta and its usage, before message_stop: the client gets the message it was billed for, not a 502', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  try {
    script(up, (res) => {
      for (const e of [start(), ...text(10)]) res.write(e);
      res.write(
        ev('message_delta', {
          delta: { stop_reason: 'end_turn', stop_sequence: null },
          usage: { output_tokens: 10 },
        }),
      );
      // The last event with content went out; the connection is then reset, not ended.
      setTimeout(() => res.destroy(), 50);
    });
    let before = (await s.settled('support-bot')).billedTokens;
    for (const stream of [false, true]) {
      const r = await call(s, stream);
      expect(r.status).toBe(200);
      if (stream) {
        expect(r.text).toContain('event: message_delta');
        // The stream is closed as Anthropic closes one, once.
        expect(r.text.match(/event: message_stop/g)).toHaveLength(1);
        expect(r.text).not.toContain('event: error');
      } else {
        expect(JSON.parse(r.text)).toMatchObject({
          stop_reason: 'end_turn',
          usage: { input_tokens: PROMPT, output_tokens: 10 },
        });
      }
      // Billed once, as the provider reported.
      const usage = await s.settled('support-bot');
      expect(usage.billedTokens - before).toBe(PROMPT + 10);
      before = usage.billedTokens;
    }
  } finally {
    await up.stop();
  }
});

test("a tenant naming another tenant's code execution container is answered as for an unknown container: nothing counted, held or sent; the owner reuses it", async ({
  stack,
  redis,
  iso,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  const container = {
    id: 'container_011CPR5CNjB747bTd36fQLFk',
    expires_at: '2026-12-06T12:00:00Z',
  };
  const seen = counted(up, (res) => {
    for (const e of [start(), ...text(3)]) res.write(e);
    res.write(
      ev('message_delta', {
        delta: { stop_reason: 'end_turn', stop_sequence: null, container },
        usage: { output_tokens: 3 },
      }),
    );
    res.end(ev('message_stop', {}));
  });
  try {
    // support-bot's call ran code in a container (the provider keeps its files).
    const first = await post(s, '/v1/messages', ask(), headersOf(KEYS.support));
    expect(first.status).toBe(200);
    await s.settled('support-bot');
    expect(await redis.get(`${iso.keyPrefix}:{support-bot}:ro:${container.id}`)).toBe(
      'support-bot',
    );

    const before = {
      calls: seen.calls,
      counts: seen.counts,
      held: (await s.settled('batch-summariser')).billedTokens,
    };
    for (const named of [container.id, { id: container.id }]) {
      const stolen = await post(
        s,
        '/v1/messages',
        ask({ container: named }),
        headersOf(KEYS.batch),
      );
      expect(stolen.status).toBe(400);
      expect(stolen.body).toMatchObject({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message: expect.stringContaining(`Container with id '${container.id}' not found`),
        },
      });
    }
    // The same answer as for a container nobody made.
    for (const unknown of ['container_0123456789abcdef', 'container_a b']) {
      const none = await post(
        s,
        '/v1/messages',
        ask({ container: unknown }),
        headersOf(KEYS.batch),
      );
      expect(none.status).toBe(400);
      expect(JSON.stringify(none.body)).toContain(`Container with id '${unknown}' not found`);
    }
    expect(seen.calls).toBe(before.calls);
    expect(seen.counts).toBe(before.counts);
    expect((await s.settled('batch-summariser')).billedTokens).toBe(before.held);

    // Its owner reuses it, at once.
    const again = await post(
      s,
      '/v1/messages',
      ask({ container: container.id }),
      headersOf(KEYS.support),
    );
    expect(again.status).toBe(200);
    expect(seen.calls).toBe(before.calls + 1);
  } finally {
    await up.stop();
  }
});

/**
 * A code execution call's output file (the provider keeps it in its Files API for every team of
 * the upstream account): support-bot's call reports it; a team of another org, or of the same
 * org, that names it gets the answer for an unknown file; its owner and an operator's upload
 * (a file no call made) pass.
 */
async function fileOwnerCase(
  stack: (o: object) => Promise<Stack>,
  redis: { get: (k: string) => Promise<string | null> },
  keyPrefix: string,
  sameOrg: boolean,
): Promise<void> {
  const { s, up } = await scriptedStack(stack, 'claude', (c) => {
    withClaude(c);
    if (!sameOrg) return;
    c.tenants.push({ id: 'acme' });
    entry(c.tenants, 'support-bot').parent = 'acme';
    entry(c.tenants, 'batch-summariser').parent = 'acme';
  });
  const file = 'file_011CNha8iCJcU1wXNR6q4V8w';
  const seen = counted(up, (res) => {
    res.write(start());
    res.write(
      ev('content_block_start', {
        index: 0,
        content_block: {
          type: 'bash_code_execution_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: {
            type: 'bash_code_execution_result',
            stdout: '',
            stderr: '',
            return_code: 0,
            content: [{ type: 'bash_code_execution_output', file_id: file }],
          },
        },
      }),
    );
    res.write(ev('content_block_stop', { index: 0 }));
    res.write(
      ev('message_delta', {
        delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: { output_tokens: 3 },
      }),
    );
    res.end(ev('message_stop', {}));
  });
  try {
    const headers = (key: string) => ({
      ...headersOf(key),
      'anthropic-beta': 'files-api-2025-04-14',
    });
    const naming = (id: string) => [
      { type: 'container_upload', file_id: id },
      { type: 'document', source: { type: 'file', file_id: id } },
      { type: 'image', source: { type: 'file', file_id: id } },
    ];
    // Anywhere else the Messages API reads a file by id: an image in a document's own content,
    // a tool result's image or document.
    const nested = (id: string) => [
      {
        type: 'document',
        source: {
          type: 'content',
          content: [{ type: 'image', source: { type: 'file', file_id: id } }],
        },
      },
      {
        type: 'tool_result',
        tool_use_id: 'toolu_1',
        content: [{ type: 'document', source: { type: 'file', file_id: id } }],
      },
    ];
    const asking = (block: object) =>
      ask({ messages: [{ role: 'user', content: [{ type: 'text', text: words(20) }, block] }] });
    // support-bot's call wrote a file (its output names the file_id).
    const first = await post(s, '/v1/messages', ask(), headers(KEYS.support));
    expect(first.status).toBe(200);
    await s.settled('support-bot');
    expect(await redis.get(`${keyPrefix}:{_files}:fo:${file}`)).toBe('support-bot');

    const before = {
      calls: seen.calls,
      counts: seen.counts,
      billed: (await s.settled('batch-summariser')).billedTokens,
    };
    // The file, and the same id disguised (a space, upper case, a zero-width space: no call
    // made such an id, and a lenient reader upstream could take it for the file).
    const disguised = [
      ` ${file}`,
      file.toUpperCase(),
      `${file}\u200b`,
      `\uff46ile_${file.slice(5)}`,
    ];
    const blocks = [file, ...disguised].flatMap((id) =>
      [...naming(id), ...nested(id)].map((block) => [id, block] as const),
    );
    for (const [id, block] of blocks) {
      const stolen = await post(s, '/v1/messages', asking(block), headers(KEYS.batch));
      expect(stolen.status, `${JSON.stringify(block)}`).toBe(400);
      expect(stolen.body).toMatchObject({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message: `invalid_request: File with id '${id}' not found (named in messages).`,
        },
      });
      // Its count is answered the same, byte for byte but for the request's own id, and the
      // upstream counts nothing.
      const path = '/v1/messages/count_tokens';
      const counting = await post(s, path, asking(block), headers(KEYS.batch));
      expect(counting.status).toBe(400);
      const same = (b: object) => JSON.stringify({ ...b, request_id: '' });
      expect(same(counting.body)).toBe(same(stolen.body));
    }
    expect(seen.calls).toBe(before.calls);
    expect(seen.counts).toBe(before.counts);
    expect((await s.settled('batch-summariser')).billedTokens).toBe(before.billed);

    // A file no call made (the operator's upload) is every team's.
    const operator = await post(
      s,
      '/v1/messages',
      asking(naming('file_011OperatorUpload0000000')[1]!),
      headers(KEYS.batch),
    );
    expect(operator.status).toBe(200);
    // A tool's own arguments are not read as a file: a file_id there, even disguised, goes on.
    const toolTurn = ask({
      messages: [
        { role: 'user', content: words(20) },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_1', name: 'open', input: { file_id: ` ${file}` } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' }] },
      ],
    });
    expect((await post(s, '/v1/messages', toolTurn, headers(KEYS.batch))).status).toBe(200);
    expect(seen.calls).toBe(before.calls + 2);
    // Its output repeats support-bot's file: the file stays support-bot's.
    await s.settled('batch-summariser');
    expect(await redis.get(`${keyPrefix}:{_files}:fo:${file}`)).toBe('support-bot');

    // Its owner reads it, at once (but not disguised: nobody made such an id).
    for (const block of naming(file)) {
      const again = await post(s, '/v1/messages', asking(block), headers(KEYS.support));
      expect(again.status).toBe(200);
      const path = '/v1/messages/count_tokens';
      const count = await post(s, path, asking(block), headers(KEYS.support));
      expect(count.status).toBe(200);
    }
    expect(seen.calls).toBe(before.calls + 5);
  } finally {
    await up.stop();
  }
}

test("a team of another org naming a file another team's code execution wrote is answered as for an unknown file: nothing counted, held or sent; the owner and an operator's upload pass", async ({
  stack,
  redis,
  iso,
}) => {
  await fileOwnerCase(stack, redis, iso.keyPrefix, false);
});

test("a team of the same org naming a file another team's code execution wrote is refused too", async ({
  stack,
  redis,
  iso,
}) => {
  await fileOwnerCase(stack, redis, iso.keyPrefix, true);
});

test("a message_delta that reports no output count (usage null or left out) is billed the output the edge counted, not message_start's placeholder", async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  try {
    let before = (await s.settled('support-bot')).billedTokens;
    for (const usage of [{ output_tokens: null }, undefined]) {
      script(up, (res) => {
        // message_start's output_tokens is Anthropic's placeholder (1), not the reply's count.
        for (const e of [start(), ...text(40)]) res.write(e);
        const delta = { stop_reason: 'end_turn', stop_sequence: null };
        res.write(ev('message_delta', usage ? { delta, usage } : { delta }));
        res.end(ev('message_stop', {}));
      });
      for (const stream of [false, true]) {
        const r = await call(s, stream);
        expect(r.status).toBe(200);
        // The prompt message_start reported, and the 40 words written (41: the edge's count
        // of a reply adds the token of the '.' it is counted against), never 1.
        const billed = (await s.settled('support-bot')).billedTokens - before;
        expect(billed).toBe(PROMPT + 41);
        before += billed;
      }
    }
  } finally {
    await up.stop();
  }
});

test("an error event before message_start (Anthropic overloaded) bills nothing: the hold is released, the client gets Anthropic's 529 (nothing had reached it)", async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'claude', withClaude);
  try {
    const overloaded = { type: 'overloaded_error', message: 'Overloaded' };
    script(up, (res) => res.end(ev('error', { error: overloaded })));
    const before = await s.settled('support-bot');
    // This upstream tries each call once: out of retries at once, answered with the status
    // the error stands for, streaming or not (the stream's head was held back).
    for (const stream of [false, true]) {
      const r = await call(s, stream);
      expect(r.status).toBe(529);
      expect(JSON.parse(r.text)).toMatchObject({
        type: 'error',
        error: { type: 'overloaded_error', message: expect.stringContaining('(529)') },
      });
    }
    const after = await s.settled('support-bot');
    expect(after.billedTokens).toBe(before.billedTokens);
    expect(after.windows.every((w) => w.held === 0)).toBe(true);

    // After message_start the provider has read the prompt: billed, and still told once.
    script(up, (res) => {
      for (const e of [start(), ...text(5)]) res.write(e);
      res.end(ev('error', { error: overloaded }));
    });
    const mid = await call(s, true);
    expect(mid.text.match(/event: error/g)).toHaveLength(1);
    expect((await s.settled('support-bot')).billedTokens - after.billedTokens).toBe(PROMPT + 6);
  } finally {
    await up.stop();
  }
});
