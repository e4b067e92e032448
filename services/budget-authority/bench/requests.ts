/**
 * What the script benches send (scripts.bench.ts, durability.bench.ts): an org with a team
 * under it and three windows (limits no run reaches), one admission and its settlement.
 */
export const CONFIG = {
  upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
  models: [{ id: 'gpt-4o-mini', upstream: 'u', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } }],
  tenants: [
    { id: 'acme', budgets: [{ window: 'month', limit: 1e12 }] },
    {
      id: 'team',
      parent: 'acme',
      budgets: [
        { window: 'minute', limit: 1e12 },
        { window: 'day', limit: 1e6, unit: 'usd' },
      ],
      useCases: [{ id: 'uc', maxTokens: 1_024, models: ['gpt-4o-mini'] }],
    },
  ],
};

export const admitRequest = (reservationId: string) => ({
  reservationId,
  tenant: 'team',
  keyId: null,
  useCase: 'uc',
  model: 'gpt-4o-mini',
  promptTokens: 370,
  maxTokens: 1_024,
  extensible: true,
  audioInput: false,
  audioOutput: false,
  serviceTier: 'default',
  api: 'chat' as const,
});

export const settleRequest = (reservationId: string) => ({
  reservationId,
  tenant: 'team',
  org: 'acme',
  usage: {
    promptTokens: 370,
    completionTokens: 500,
    cachedPromptTokens: 0,
    cacheWrite5mTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    audioPromptTokens: 0,
    audioCompletionTokens: 0,
  },
  outcome: 'completed' as const,
});
