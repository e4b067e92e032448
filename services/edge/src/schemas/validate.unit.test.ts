import { describe, expect, it } from 'vitest';
import type { EdgeError } from '../errors.js';
import { ChatRequest } from '../surfaces/chat/schema.js';
import { zodValidatorCompiler } from './validate.js';

const validate = zodValidatorCompiler({ schema: ChatRequest } as never);

function refusal(body: unknown): { message: string; param: string | null } {
  const r = validate(body) as { error?: EdgeError };
  if (!r.error) throw new Error('expected a refusal');
  return { message: r.error.message, param: r.error.param };
}

const user = (content: unknown) => ({ model: 'm', messages: [{ role: 'user', content }] });

describe('request schema errors say what was expected and what came', () => {
  it('content: 42 names both shapes content takes, not "Invalid input"', () => {
    expect(refusal(user(42))).toEqual({
      message:
        'Invalid request: messages.0.content: expected a string or an array, got the number 42.',
      param: 'messages.0.content',
    });
  });

  it('a bad part inside a content array is named at its own path', () => {
    expect(refusal(user([{ type: 'text', text: 5 }]))).toEqual({
      message: 'Invalid request: messages.0.content.0.text: expected a string, got the number 5.',
      param: 'messages.0.content.0.text',
    });
    expect(refusal(user([{ type: 'image', url: 'x' }])).message).toBe(
      'Invalid request: messages.0.content.0.type: expected one of "text", "image_url", "input_audio", "file", got the string "image".',
    );
  });

  it('an unknown role lists the roles; a missing field says it is missing', () => {
    expect(refusal({ model: 'm', messages: [{ role: 'robot', content: 'x' }] }).message).toBe(
      'Invalid request: messages.0.role: expected one of "system", "developer", "user", "assistant", "tool", "function", got the string "robot".',
    );
    expect(refusal({ model: 'm', messages: [{ role: 'user' }] }).message).toBe(
      'Invalid request: messages.0.content: expected a string or an array, got nothing (the field is missing).',
    );
    expect(refusal({ messages: [] }).message).toBe(
      'Invalid request: model: expected a string, got nothing (the field is missing).',
    );
  });

  it("ranges keep zod's own wording", () => {
    expect(refusal({ ...user('x'), temperature: 5 }).message).toBe(
      'Invalid request: temperature: Too big: expected number to be <=2.',
    );
  });
});
