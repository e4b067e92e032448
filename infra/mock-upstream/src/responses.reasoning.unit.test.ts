import type { ResponseInputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';
import { startMockUpstream } from './index.js';

/**
 * Reasoning items passed back as input, as OpenAI's reasoning models bill them: the whole
 * reasoning of the current turn (after the last user message) is input, sealed in the item's
 * encrypted_content or kept with a stored response; an earlier turn's is dropped.
 */
const mock = useMockUpstream();
const tools = [
  { type: 'function' as const, name: 'lookup', parameters: {}, strict: false },
] as const;
const question: ResponseInputItem = { role: 'user', content: 'How much budget is left?' };
/** A function-calling step: reasoning at medium effort (1,000 tokens), a forced call. */
const step = {
  model: 'gpt-5',
  tools: [...tools],
  tool_choice: 'required' as const,
  reasoning: { effort: 'medium' as const },
  max_output_tokens: 2_000,
};
const REASONING = { headers: { 'x-mock-reasoning-tokens': '1000' } };

type Item = Record<string, unknown> & { type: string; id: string };

/** One stateless step: its reasoning item (sealed) and function call. */
async function firstStep(extra: object = {}): Promise<{ reasoning: Item; call: Item }> {
  const res = await mock.client().responses.create(
    {
      ...step,
      input: [question],
      store: false,
      include: ['reasoning.encrypted_content'],
      ...extra,
    },
    REASONING,
  );
  const [reasoning, fn] = res.output as unknown as Item[];
  expect(reasoning?.type).toBe('reasoning');
  expect(fn?.type).toBe('function_call');
  return { reasoning: reasoning!, call: fn! };
}

const output = (c: Item): ResponseInputItem => ({
  type: 'function_call_output',
  call_id: c.call_id as string,
  output: '210 tokens left',
});
const asInput = (items: object[]) => items as ResponseInputItem[];

/** input_tokens for a body, and what a create of it is billed as input. */
async function counted(input: ResponseInputItem[], extra: object = {}) {
  const client = mock.client();
  const body = { model: 'gpt-5', tools: [...tools], input, ...extra };
  const count = await client.responses.inputTokens.count(body);
  const res = await client.responses.create({ ...body, max_output_tokens: 100 });
  expect(res.usage!.input_tokens).toBe(count.input_tokens);
  return count.input_tokens;
}

describe('reasoning items on /v1/responses', () => {
  it('carry the reasoning sealed when include asks for it: opaque, new each time, the same streamed', async () => {
    const { reasoning } = await firstStep();
    const sealed = reasoning.encrypted_content as string;
    expect(sealed).toMatch(/^gAAAAA[A-Za-z0-9_-]+=*$/);
    // Nothing a reader can decode: not JSON, no count in the clear.
    expect(Buffer.from(sealed, 'base64url').toString('latin1')).not.toContain('1000');
    expect((await firstStep()).reasoning.encrypted_content).not.toBe(sealed);
    const plain = await mock.client().responses.create({ ...step, input: [question] }, REASONING);
    expect(plain.output[0]).not.toHaveProperty('encrypted_content');

    const stream = await mock
      .client()
      .responses.create(
        { ...step, input: [question], include: ['reasoning.encrypted_content'], stream: true },
        REASONING,
      );
    const events: ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const done = events.find(
      (e) => e.type === 'response.output_item.done' && e.item.type === 'reasoning',
    );
    const completed = events.at(-1) as Extract<ResponseStreamEvent, { type: 'response.completed' }>;
    const streamed = done && 'item' in done ? (done.item as unknown as Item) : undefined;
    expect(streamed?.encrypted_content).toMatch(/^gAAAAA/);
    expect((completed.response.output[0] as unknown as Item).encrypted_content).toBe(
      streamed?.encrypted_content,
    );
  });

  it('bills a sealed reasoning item of the current turn as input, its whole reasoning; one of an earlier turn is free', async () => {
    const { reasoning, call: fn } = await firstStep();
    const without = await counted(asInput([question, fn, output(fn)]));
    const current = await counted(asInput([question, reasoning, fn, output(fn)]));
    expect(current).toBe(without + 1_000);
    // After a function call's output, stuffed: each one is billed again.
    const stuffed = await counted(asInput([question, fn, output(fn), reasoning, reasoning]));
    expect(stuffed).toBe(without + 2_000);
    // A new user message ends the turn: the reasoning before it is dropped.
    const next: ResponseInputItem = { role: 'user', content: 'Thanks. And next month?' };
    const later = await counted(asInput([question, reasoning, fn, output(fn), next]));
    expect(later).toBe(await counted(asInput([question, fn, output(fn), next])));
  });

  it('refuses encrypted content it did not seal, as OpenAI does: another instance, an altered byte, garbage', async () => {
    const other = await startMockUpstream({ port: 0 });
    const foreign = await (async () => {
      const res = await call(
        other,
        'POST',
        '/v1/responses',
        { ...step, input: [question], include: ['reasoning.encrypted_content'] },
        REASONING.headers,
      );
      return (res.json as { output: Item[] }).output[0]!;
    })().finally(() => other.stop());
    const { reasoning, call: fn } = await firstStep();
    const sealed = reasoning.encrypted_content as string;
    const flipped = `${sealed.slice(0, 40)}${sealed[40] === 'A' ? 'B' : 'A'}${sealed.slice(41)}`;
    for (const content of [foreign.encrypted_content, flipped, 'not-sealed', '']) {
      for (const path of ['/v1/responses', '/v1/responses/input_tokens']) {
        const res = await call(mock.upstream(), 'POST', path, {
          model: 'gpt-5',
          input: [question, fn, output(fn), { ...reasoning, encrypted_content: content }],
        });
        expect(res.status, `${path} ${String(content)}`).toBe(400);
        expect(res.json).toMatchObject({
          error: { type: 'invalid_request_error', code: 'invalid_encrypted_content', param: null },
        });
        expect((res.json as { error: { message: string } }).error.message).toContain(
          'could not be verified',
        );
      }
    }
    // The same refusal for encrypted content on another item type (a compaction item).
    const compaction = await call(mock.upstream(), 'POST', '/v1/responses/input_tokens', {
      model: 'gpt-5',
      input: [question, { type: 'compaction', id: 'cmp_1', encrypted_content: sealed }],
    });
    expect(compaction.status).toBe(400);
    // Only the first step was billed.
    expect(mock.upstream().stats().recent).toHaveLength(1);
  });

  it('reads a stored reasoning item by id (a reasoning item without content, item_reference); an unstored id is a 404', async () => {
    const client = mock.client();
    const first = await client.responses.create({ ...step, input: [question] }, REASONING);
    const [reasoning, fn] = first.output as unknown as Item[];
    expect(reasoning).not.toHaveProperty('encrypted_content');
    // The call without its id (with it, store on, it needs its reasoning item: below).
    const { id: _id, ...anonymous } = fn!;
    const without = await counted(asInput([question, anonymous, output(fn!)]));
    const byId = { type: 'reasoning', id: reasoning!.id, summary: [] };
    expect(await counted(asInput([question, byId, fn!, output(fn!)]))).toBe(without + 1_000);
    const reference = { type: 'item_reference', id: reasoning!.id };
    expect(await counted(asInput([question, reference, fn!, output(fn!)]))).toBe(without + 1_000);
    // The type of an item_reference may be left out: an id alone.
    const bare = { id: reasoning!.id };
    expect(await counted(asInput([question, bare, fn!, output(fn!)]))).toBe(without + 1_000);
    // A function call by reference reads the stored call.
    const callRef = { type: 'item_reference', id: fn!.id };
    expect(await counted(asInput([question, callRef, output(fn!)]))).toBe(without);

    const { reasoning: unstored } = await firstStep();
    const res = await call(mock.upstream(), 'POST', '/v1/responses/input_tokens', {
      model: 'gpt-5',
      input: [question, { ...unstored, encrypted_content: null }],
    });
    expect(res.status).toBe(404);
    expect(res.json).toMatchObject({ error: { type: 'invalid_request_error', param: 'input' } });
    expect((res.json as { error: { message: string } }).error.message).toContain(
      `Item with id '${unstored.id}' not found. Items are not persisted when \`store\` is set to false.`,
    );
    await client.responses.delete(first.id);
    const gone = await call(mock.upstream(), 'POST', '/v1/responses/input_tokens', {
      model: 'gpt-5',
      input: [question, byId],
    });
    expect(gone.status).toBe(404);
  });

  it("refuses a reasoning model's function call sent back by id without the reasoning item it followed (store on), as OpenAI does", async () => {
    const client = mock.client();
    const first = await client.responses.create({ ...step, input: [question] }, REASONING);
    const [reasoning, fn] = first.output as unknown as Item[];
    const res = await call(mock.upstream(), 'POST', '/v1/responses', {
      ...step,
      input: [question, fn, output(fn!)],
    });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({
      error: {
        message: `Item '${fn!.id}' of type 'function_call' was provided without its required 'reasoning' item: '${reasoning!.id}'.`,
        type: 'invalid_request_error',
        param: 'input',
        code: null,
      },
    });
    const count = await call(mock.upstream(), 'POST', '/v1/responses/input_tokens', {
      model: 'gpt-5',
      input: [question, fn, output(fn!)],
    });
    expect(count.status).toBe(400);
    // Read with its reasoning item before it (whole, by id, by reference), after the response
    // that holds it (previous_response_id), with store false, or without its id.
    const byId = { type: 'reasoning', id: reasoning!.id, summary: [] };
    const reference = { type: 'item_reference', id: reasoning!.id };
    const { id: _id, ...anonymous } = fn!;
    for (const [input, extra] of [
      [[question, reasoning, fn, output(fn!)], {}],
      [[question, byId, fn, output(fn!)], {}],
      [[question, reference, fn, output(fn!)], {}],
      [[fn, output(fn!)], { previous_response_id: first.id }],
      [[question, fn, output(fn!)], { store: false }],
      [[question, anonymous, output(fn!)], {}],
    ] as const) {
      const ok = await call(mock.upstream(), 'POST', '/v1/responses', { ...step, input, ...extra });
      expect(ok.status, JSON.stringify(input)).toBe(200);
    }
  });

  it('bills the stored reasoning of previous_response_id within the turn, not after a new user message', async () => {
    const client = mock.client();
    const first = await client.responses.create({ ...step, input: [question] }, REASONING);
    // The call as a fresh conversation sends it: without its id (with it, store on, it needs
    // its reasoning item along).
    const { id: _id, ...fn } = first.output[1] as unknown as Item;
    const next = { previous_response_id: first.id };
    const continued = await counted(asInput([output(fn as Item)]), next);
    const fresh = await counted(asInput([question, fn, output(fn as Item)]));
    expect(continued).toBe(fresh + 1_000);
    const newTurn = await counted(asInput([{ role: 'user', content: 'And next month?' }]), next);
    const newTurnFresh = await counted(
      asInput([question, fn, { role: 'user', content: 'And next month?' }]),
    );
    expect(newTurn).toBe(newTurnFresh);
  });

  it('bills a reasoning item with nothing hidden as its text in the current turn, free before it', async () => {
    const shown = {
      type: 'reasoning',
      summary: [{ type: 'summary_text', text: 'Check the ledger first.' }],
      content: [{ type: 'reasoning_text', text: 'The ledger lives in Redis.' }],
    };
    const asText: ResponseInputItem = {
      role: 'assistant',
      content: 'Check the ledger first.The ledger lives in Redis.',
    };
    expect(await counted(asInput([question, shown]))).toBe(
      await counted(asInput([question, asText])),
    );
    expect(await counted(asInput([shown, question]))).toBe(await counted(asInput([question])));
  });
});
