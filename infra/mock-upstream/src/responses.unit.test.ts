import { waitFor } from '@holdfast/testkit';
import { APIError } from 'openai';
import type { ResponseInputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const base = {
  model: 'gpt-4o-mini',
  instructions: 'You summarise incident reports.',
  input: 'Summarise: the nightly batch overran its token budget by 12%.',
};

async function collect(stream: AsyncIterable<ResponseStreamEvent>) {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

describe('POST /v1/responses with the official client', () => {
  it('bills as input exactly what input_tokens counts for the same body', async () => {
    const client = mock.client();
    const res = await client.responses.create({ ...base, max_output_tokens: 100 });
    const counted = await client.responses.inputTokens.count(base);
    expect(counted.object).toBe('response.input_tokens');
    expect(res).toMatchObject({ object: 'response', status: 'completed', model: base.model });
    expect(res.usage).toMatchObject({
      input_tokens: counted.input_tokens,
      output_tokens: 50,
      total_tokens: counted.input_tokens + 50,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    });
    expect(res.output_text.split(' ')).toHaveLength(50);
    expect(mock.upstream().stats().recent[0]).toMatchObject({
      route: 'responses',
      promptTokens: counted.input_tokens,
      completionTokens: 50,
      finishReason: 'completed',
      maxTokens: 100,
    });
  });

  it('ends incomplete at max_output_tokens, and refuses fewer than 16', async () => {
    const res = await mock.client().responses.create({ ...base, max_output_tokens: 20 });
    expect(res.status).toBe('incomplete');
    expect(res.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(res.usage!.output_tokens).toBe(20);
    const err = await mock
      .client()
      .responses.create({ ...base, max_output_tokens: 5 })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, param: 'max_output_tokens' });
  });

  it('streams the typed events in OpenAI order, usage on response.completed', async () => {
    const stream = await mock
      .client()
      .responses.create(
        { ...base, stream: true },
        { headers: { 'x-mock-completion-tokens': '5' } },
      );
    const events = await collect(stream);
    const types = events.map((e) => e.type);
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...Array<string>(5).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const done = events.at(-1) as Extract<ResponseStreamEvent, { type: 'response.completed' }>;
    const text = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(done.response.output_text ?? text.join('')).toBe(text.join(''));
    expect(done.response.usage!.output_tokens).toBe(5);
    expect(mock.upstream().stats().usage.completionTokens).toBe(5);
  });

  it('streams response.incomplete when the cap ends it', async () => {
    const stream = await mock
      .client()
      .responses.create({ ...base, stream: true, max_output_tokens: 16 });
    const last = (await collect(stream)).at(-1)!;
    expect(last.type).toBe('response.incomplete');
  });

  it('spends reasoning tokens inside max_output_tokens and bills them as output', async () => {
    const client = mock.client();
    const res = await client.responses.create(
      { ...base, reasoning: { effort: 'low' }, max_output_tokens: 100 },
      { headers: { 'x-mock-reasoning-tokens': '60', 'x-mock-completion-tokens': '20' } },
    );
    expect(res.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    expect(res.usage).toMatchObject({
      output_tokens: 50,
      output_tokens_details: { reasoning_tokens: 30 },
    });
    const starved = await client.responses.create(
      { ...base, reasoning: { effort: 'high' }, max_output_tokens: 100 },
      { headers: { 'x-mock-reasoning-tokens': '60' } },
    );
    // 120 reasoning tokens wanted, 100 allowed: no message at all.
    expect(starved.status).toBe('incomplete');
    expect(starved.output.map((o) => o.type)).toEqual(['reasoning']);
    expect(starved.usage).toMatchObject({
      output_tokens: 100,
      output_tokens_details: { reasoning_tokens: 100 },
    });
    expect(mock.upstream().stats().billed.reasoningTokens).toBe(130);
  });

  it('counts the stored conversation as input for previous_response_id, but not with store: false', async () => {
    const client = mock.client();
    const first = await client.responses.create({ ...base, max_output_tokens: 30 });
    const next = { model: base.model, input: 'And the cause?', previous_response_id: first.id };
    const counted = await client.responses.inputTokens.count(next);
    const alone = await client.responses.inputTokens.count({
      model: base.model,
      input: 'And the cause?',
    });
    expect(counted.input_tokens).toBeGreaterThan(alone.input_tokens + 30);
    const second = await client.responses.create(next);
    expect(second.usage!.input_tokens).toBe(counted.input_tokens);
    expect(second.previous_response_id).toBe(first.id);
    expect((await client.responses.retrieve(first.id)).id).toBe(first.id);

    const unstored = await client.responses.create({ ...base, store: false });
    const err = await client.responses
      .create({ model: base.model, input: 'x', previous_response_id: unstored.id })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({
      status: 400,
      param: 'previous_response_id',
      code: 'previous_response_not_found',
    });
  });

  it('takes input items: messages with text and image parts, function calls and their outputs', async () => {
    const tools = [
      {
        type: 'function' as const,
        name: 'lookup_budget',
        description: 'Remaining budget of a team',
        parameters: {
          type: 'object',
          properties: { team: { type: 'string' } },
          required: ['team'],
        },
        strict: true,
      },
    ];
    const input = [
      {
        role: 'user' as const,
        content: [
          { type: 'input_text' as const, text: 'How much is left?' },
          {
            type: 'input_image' as const,
            image_url: 'https://example.test/chart.png',
            detail: 'low' as const,
          },
        ],
      },
      {
        type: 'function_call' as const,
        call_id: 'c1',
        name: 'lookup_budget',
        arguments: '{"team":"a"}',
      },
      { type: 'function_call_output' as const, call_id: 'c1', output: '210 tokens' },
    ];
    const client = mock.client();
    const counted = await client.responses.inputTokens.count({ model: 'gpt-4o', input, tools });
    const without = await client.responses.inputTokens.count({ model: 'gpt-4o', input });
    expect(counted.input_tokens).toBeGreaterThan(without.input_tokens);
    const res = await client.responses.create({ model: 'gpt-4o', input, tools });
    expect(res.usage!.input_tokens).toBe(counted.input_tokens);
  });

  it('calls the function tool_choice forces, streaming its arguments', async () => {
    const tools = [
      { type: 'function' as const, name: 'lookup_budget', parameters: {}, strict: false },
    ];
    const client = mock.client();
    const res = await client.responses.create({ ...base, tools, tool_choice: 'required' });
    const item = res.output[0]!;
    expect(item.type).toBe('function_call');
    const args = item.type === 'function_call' ? item.arguments : '';
    expect(JSON.parse(args)).toHaveProperty('input');
    expect(res.usage!.output_tokens).toBeLessThanOrEqual(50);
    const stream = await client.responses.create({
      ...base,
      tools,
      tool_choice: { type: 'function', name: 'lookup_budget' },
      stream: true,
    });
    const events = await collect(stream);
    const deltas = events.flatMap((e) =>
      e.type === 'response.function_call_arguments.delta' ? [e.delta] : [],
    );
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    expect(done && 'arguments' in done ? done.arguments : '').toBe(deltas.join(''));
    const completed = events.at(-1) as Extract<ResponseStreamEvent, { type: 'response.completed' }>;
    expect(completed.response.usage!.output_tokens).toBe(
      mock.upstream().stats().recent[1]!.completionTokens,
    );
  });
});

describe('MCP approvals on /v1/responses', () => {
  const mcp = {
    type: 'mcp' as const,
    server_label: 'docs',
    server_url: 'https://mcp.example.test',
    require_approval: 'always' as const,
  };

  it('asks to approve an mcp call (JSON and stream), and takes an approval only of a request it made', async () => {
    const client = mock.client();
    const res = await client.responses.create({ ...base, tools: [mcp] });
    const asked = res.output.find((o) => o.type === 'mcp_approval_request');
    expect(asked).toMatchObject({ id: expect.stringMatching(/^mcpr_/), server_label: 'docs' });
    const stream = await client.responses.create({ ...base, tools: [mcp], stream: true });
    const added = (await collect(stream)).find(
      (e) => e.type === 'response.output_item.added' && e.item.type === 'mcp_approval_request',
    );
    expect(added).toBeDefined();
    // No request without a tool that asks (`never`).
    const never = await client.responses.create({
      ...base,
      tools: [{ ...mcp, require_approval: 'never' }],
    });
    expect(never.output.some((o) => o.type === 'mcp_approval_request')).toBe(false);

    const approve = (id: string): ResponseInputItem => ({
      type: 'mcp_approval_response',
      approval_request_id: id,
      approve: true,
    });
    // A stored request is approved by id, after its response; one of the input too (store: false).
    const approved = await client.responses.create({
      ...base,
      tools: [mcp],
      previous_response_id: res.id,
      input: [approve(asked!.id)],
    });
    expect(approved.output.some((o) => o.type === 'mcp_approval_request')).toBe(false);
    const request = {
      type: 'mcp_approval_request',
      id: 'mcpr_x',
      server_label: 'docs',
      name: 'search',
      arguments: '{}',
    } as ResponseInputItem;
    const sent = await client.responses.create({
      ...base,
      tools: [mcp],
      input: [request, approve('mcpr_x')],
    });
    expect(sent.status).toBe('completed');
    // A request it never made: refused, as an unknown item.
    const unknown = await client.responses
      .create({ ...base, tools: [mcp], input: [approve('mcpr_unknown')] })
      .catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 404, param: 'input' });
  });
});

describe('POST /v1/responses/input_tokens', () => {
  it("counts a custom tool's output as a function's, parts and all", async () => {
    const client = mock.client();
    const output = [
      { type: 'input_text' as const, text: 'The chart:' },
      {
        type: 'input_image' as const,
        image_url: 'https://example.test/c.png',
        detail: 'high' as const,
      },
    ];
    const count = (type: string) =>
      client.responses.inputTokens.count({
        model: 'gpt-4o',
        input: [
          { role: 'user', content: 'Plot it.' },
          { type, call_id: 'c1', output } as unknown as ResponseInputItem,
        ],
      });
    const custom = await count('custom_tool_call_output');
    expect(custom.input_tokens).toBe((await count('function_call_output')).input_tokens);
    // The image is priced as an image (an http URL at its worst case), not as its JSON.
    expect(custom.input_tokens).toBeGreaterThan(700);
  });

  it('answers 404 when switched off, as an upstream without it', async () => {
    mock.upstream().configure({ responsesInputTokens: false });
    const res = await call(mock.upstream(), 'POST', '/v1/responses/input_tokens', base);
    expect(res.status).toBe(404);
    expect(res.json).toMatchObject({ error: { type: 'invalid_request_error' } });
  });
});

describe('faults and vendor fields on /v1/responses', () => {
  it('answers injected errors in OpenAI shape, and an error event mid-stream', async () => {
    const err = await mock
      .client()
      .responses.create(base, { headers: { 'x-mock-fail': '500' } })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 500, type: 'server_error' });
    const stream = await mock
      .client()
      .responses.create(
        { ...base, stream: true },
        { headers: { 'x-mock-fail': 'error', 'x-mock-fail-after-tokens': '3' } },
      );
    const seen: string[] = [];
    const broken = await (async () => {
      for await (const e of stream) seen.push(e.type);
    })().catch((e: unknown) => e);
    expect(broken).toBeInstanceOf(APIError);
    expect(seen.filter((t) => t === 'response.output_text.delta')).toHaveLength(3);
    expect(mock.upstream().stats().recent.at(-1)).toMatchObject({
      outcome: 'error_stream',
      completionTokens: 3,
    });
  });

  it('bills what streamed when the client leaves mid-stream', async () => {
    const controller = new AbortController();
    const stream = await mock.client().responses.create(
      { ...base, stream: true },
      {
        headers: { 'x-mock-token-delay-ms': '10', 'x-mock-completion-tokens': '200' },
        signal: controller.signal,
      },
    );
    let deltas = 0;
    await (async () => {
      for await (const e of stream)
        if (e.type === 'response.output_text.delta' && ++deltas === 4) controller.abort();
    })().catch(() => undefined);
    await waitFor(() => mock.upstream().stats().abortedByClient === 1, { what: 'abort seen' });
    const record = mock.upstream().stats().recent[0]!;
    expect(record.completionTokens).toBeGreaterThanOrEqual(4);
    expect(record.completionTokens).toBeLessThan(200);
  });

  it('obeys n_predict over max_output_tokens, as llama-server does on its Responses route', async () => {
    const res = await call(
      mock.upstream(),
      'POST',
      '/v1/responses',
      { ...base, max_output_tokens: 16, n_predict: 300 },
      {
        'x-mock-completion-tokens': '1000',
      },
    );
    expect((res.json as { usage: { output_tokens: number } }).usage.output_tokens).toBe(300);
  });
});
