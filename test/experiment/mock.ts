/**
 * The mock upstream's controls (`/_mock/config`, `/_mock/stats`). The edge builds its own
 * upstream headers, so per-request `x-mock-*` headers never reach the mock: each phase of a
 * run sets the reply length for all calls through the admin API instead.
 */
export interface MockStats {
  requests: { chatCompletions: number };
  billed: { promptTokens: number; completionTokens: number };
  recent: Array<{ maxTokens: number | null; promptTokens: number; completionTokens: number }>;
}

export type CompletionLength =
  { mode: 'fixed'; tokens: number } | { mode: 'uniform'; min: number; max: number };

export class MockControl {
  constructor(private readonly url: string) {}

  async #json<T>(path: string, init?: RequestInit): Promise<T> {
    const res = await fetch(`${this.url}${path}`, init);
    if (!res.ok) throw new Error(`mock ${path}: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  config(): Promise<Record<string, unknown>> {
    return this.#json('/_mock/config');
  }

  configure(patch: Record<string, unknown>): Promise<unknown> {
    return this.#json('/_mock/config', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(patch),
    });
  }

  stats(): Promise<MockStats> {
    return this.#json('/_mock/stats');
  }
}

/** Tokens the provider billed between two stats snapshots (prompt + every token sent). */
export function billedBetween(before: MockStats, after: MockStats): number {
  return (
    after.billed.promptTokens +
    after.billed.completionTokens -
    before.billed.promptTokens -
    before.billed.completionTokens
  );
}
