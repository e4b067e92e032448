import { SINGLE_HEADER } from './floor/edge.js';
import type { Target } from './load/protocol.js';
import type { TargetName } from './phase.js';
import { BENCH_KEY } from './stack.js';

const MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Summarise the budget report for the team in one line.' },
];

function target(url: string, headers: Record<string, string>, stream: boolean): Target {
  const { origin } = new URL(url);
  const body = stream
    ? { model: 'gpt-4o-mini', messages: MESSAGES, stream, stream_options: { include_usage: true } }
    : { model: 'gpt-4o-mini', messages: MESSAGES };
  return {
    origin,
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  };
}

export type Targets = Partial<Record<TargetName, { plain: Target; stream: Target }>>;

/**
 * The same chat completion, to the mock itself, through the bare proxy, through the edge and
 * through the floor's edge (batched, and each request alone); no floor when it did not start.
 */
export function targets(urls: {
  mockUrl: string;
  proxyUrl: string;
  edgeUrl: string;
  floorUrl: string | undefined;
}): Targets {
  const auth = { authorization: `Bearer ${BENCH_KEY}` };
  const both = (url: string, headers: Record<string, string>) => ({
    plain: target(url, headers, false),
    stream: target(url, headers, true),
  });
  const floor = urls.floorUrl;
  return {
    direct: both(urls.mockUrl, {}),
    proxy: both(urls.proxyUrl, {}),
    stack: both(urls.edgeUrl, auth),
    ...(floor
      ? {
          floor: both(floor, auth),
          'floor-single': both(floor, { ...auth, [SINGLE_HEADER]: 'single' }),
        }
      : {}),
  };
}

/** One call to each target before any load: each answers 200 with the expected reply length. */
export async function checkTargets(all: Targets, completionTokens: number): Promise<void> {
  for (const [name, t] of Object.entries(all)) {
    const { plain } = t;
    const res = await fetch(`${plain.origin}${plain.path}`, {
      method: 'POST',
      headers: plain.headers,
      body: plain.body,
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${name}: HTTP ${res.status}: ${text.slice(0, 300)}`);
    const usage = (JSON.parse(text) as { usage?: { completion_tokens?: number } }).usage;
    if (usage?.completion_tokens !== completionTokens) {
      throw new Error(
        `${name}: ${usage?.completion_tokens} completion tokens, not ${completionTokens}`,
      );
    }
  }
}
