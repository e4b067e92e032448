import type { ServerResponse } from 'node:http';
import { words } from './surfaces.js';

/** Chat Completions stream chunks as a scripted upstream writes them (scripted-upstream.ts). */

export const chunk = (extra: object) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', ...extra })}\n\n`;
/** `n` content chunks of one token (` budget`) each, for choice `index`. */
export const content = (n: number, index = 0) =>
  Array.from({ length: n }, () =>
    chunk({ choices: [{ index, delta: { content: ' budget' }, finish_reason: null }] }),
  );
export const finish = (index = 0) =>
  chunk({ choices: [{ index, delta: {}, finish_reason: 'stop' }] });
export const usage = (u: unknown) => chunk({ choices: [], usage: u });
export const DONE = 'data: [DONE]\n\n';

/** The upstream's next answer: a 200 event stream that `write` writes. */
export function stream(
  up: { next: (s: (res: ServerResponse) => void) => void },
  write: (res: ServerResponse) => void,
) {
  up.next((res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    write(res);
  });
}

/** A chat call's body as a client sends it (support-bot's model, 100 tokens at most). */
export function chatBody(streamed: boolean, extra: object = {}): string {
  return JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: words(20) }],
    max_tokens: 100,
    stream: streamed,
    ...(streamed ? { stream_options: { include_usage: true } } : {}),
    ...extra,
  });
}
