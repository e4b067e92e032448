import { sha256Hex } from '../src/index.js';
import type { TestConfig } from './harness.js';
import { CLAUDE, withClaude } from './surfaces.js';

/** The keys of team `apps`: app-a may name end users in x-holdfast-user and has a budget. */
export const APP_A = 'sk-hf-apps-a';
export const APP_B = 'sk-hf-apps-b';

/** Team `apps`: end users get 1,500 tokens a day, key app-a 100,000 (issue 16 part 2). */
export function apps(c: TestConfig): void {
  withClaude(c);
  c.tenants.push({
    id: 'apps',
    mode: 'reserve',
    budgets: [{ window: 'month', limit: 1_000_000, unit: 'tokens' }],
    endUserBudgets: [{ window: 'day', limit: 1_500, unit: 'tokens', soft: [0.5] }],
    useCases: [{ id: 'uc', maxTokens: 200, models: ['gpt-4o-mini', CLAUDE] }],
    keys: [
      {
        id: 'app-a',
        sha256: sha256Hex(APP_A),
        allowUserHeader: true,
        budgets: [{ window: 'day', limit: 100_000, unit: 'tokens' }],
      },
      { id: 'app-b', sha256: sha256Hex(APP_B) },
    ],
  });
}
