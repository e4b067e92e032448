import { createHash, randomBytes } from 'node:crypto';
import { EXPERIMENT_MODEL } from './workload.js';

export const MODES = ['meter', 'post', 'estimate', 'reserve'] as const;
export type Mode = (typeof MODES)[number];

/** The teams of seeds/000, their use cases and caps. */
export const TEAMS = {
  batch: { team: 'batch-summariser', useCase: 'UC-112', cap: 1_024, budget: 40_000 },
  support: { team: 'support-bot', useCase: 'UC-101', cap: 512, budget: 60_000 },
  finance: { team: 'finance-ops', useCase: 'UC-087', cap: 512, budget: 20_000 },
} as const;
type Team = keyof typeof TEAMS;

/** One run's tenants and keys: fresh ids, so every run starts from an empty budget. */
export interface RunIdentity {
  id: string;
  tenant: Record<Team, string>;
  key: Record<Team, string>;
}

export function newRunIdentity(): RunIdentity {
  const id = `exp-${randomBytes(4).toString('hex')}`;
  const each = <T>(f: (team: Team) => T) =>
    Object.fromEntries((Object.keys(TEAMS) as Team[]).map((t) => [t, f(t)])) as Record<Team, T>;
  return {
    id,
    tenant: each((t) => `${id}-${TEAMS[t].team}`),
    key: each((t) => `sk-hf-${id}-${t}-${randomBytes(12).toString('hex')}`),
  };
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

const EXPERIMENT_UPSTREAM = 'holdfast-experiment';

/**
 * The document applied for one run: the stack's own config (so its tenants keep working)
 * plus the mock as an upstream of its own, the experiment's model, and this run's three
 * teams. Suspension at the hard limit is off while the experiment runs: the seed measures
 * the admission rules alone, and a suspended tenant would turn its 429s into 403s.
 */
export function runDocument(
  base: Record<string, unknown>,
  run: RunIdentity,
  o: { mode: Mode; batchBudget: number; upstreamUrl: string },
): Record<string, unknown> {
  const list = (name: string) => (Array.isArray(base[name]) ? (base[name] as unknown[]) : []);
  const team = (t: Team, mode: Mode, budget: number) => ({
    id: run.tenant[t],
    mode,
    budgets: [{ window: 'month', limit: budget, unit: 'tokens' }],
    useCases: [{ id: TEAMS[t].useCase, maxTokens: TEAMS[t].cap, models: [EXPERIMENT_MODEL] }],
    keys: [{ id: `${run.id}-${t}`, sha256: sha256(run.key[t]), defaultUseCase: TEAMS[t].useCase }],
  });
  const alerts = typeof base.alerts === 'object' && base.alerts !== null ? base.alerts : {};
  return {
    ...base,
    upstreams: [
      ...list('upstreams').filter((u) => (u as { id?: string }).id !== EXPERIMENT_UPSTREAM),
      { id: EXPERIMENT_UPSTREAM, baseUrl: o.upstreamUrl, timeoutMs: 120_000, maxRetries: 0 },
    ],
    models: [
      ...list('models').filter((m) => (m as { id?: string }).id !== EXPERIMENT_MODEL),
      {
        id: EXPERIMENT_MODEL,
        upstream: EXPERIMENT_UPSTREAM,
        upstreamModel: 'gpt-4o-mini',
        tokenizer: 'o200k_base',
        maxOutputTokens: 16_384,
        price: { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
      },
    ],
    tenants: [
      ...list('tenants').filter((t) => !String((t as { id?: string }).id).startsWith('exp-')),
      team('batch', o.mode, o.batchBudget),
      team('support', 'reserve', TEAMS.support.budget),
      team('finance', 'reserve', TEAMS.finance.budget),
    ],
    alerts: { ...alerts, suspendAtHardLimit: false },
  };
}
