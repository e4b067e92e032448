import type { Pool } from 'undici';

/** The benches' key (bench/services.ts' `benchTenant(KEY)` holds its hash). */
export const KEY = 'sk-holdfast-bench';

/** The benches' chat body: one short user message, 32 tokens at most; streamed with usage. */
export const chatBody = (stream: boolean): string =>
  JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Summarise the budget report for the team in one line.' }],
    max_tokens: 32,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });

/** One chat call of `payload` (a JSON body) on the edge's pool; throws on any answer but 200. */
export async function chatCall(pool: Pool, payload: string): Promise<void> {
  const res = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: payload,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${res.statusCode}: ${text.slice(0, 200)}`);
}
