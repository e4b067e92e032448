import type { TenantUsage } from '@holdfast/events';
import type { AuthorityClient } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit/infra';
import OpenAI from 'openai';
import { billedBetween, type CompletionLength, type MockControl } from './mock.js';
import { newRunIdentity, runDocument, TEAMS, type Mode, type RunIdentity } from './run-config.js';
import {
  call,
  digestMessages,
  EXPERIMENT_MODEL,
  runQueue,
  triageMessages,
  type QueueResult,
} from './workload.js';

/**
 * Reply lengths of seeds/000: 94-97% of the digests used their whole 1,024-token allowance,
 * and the median triage reply was 56 tokens. Uniform 100-15,000 before the cap fills 94% of
 * the digests (the others end between 100 and 1,023 tokens, so reserve mode has some held
 * room to give back); uniform 20-92 has a median of 56.
 */
const DIGEST_LENGTH: CompletionLength = { mode: 'uniform', min: 100, max: 15_000 };
const TRIAGE_LENGTH: CompletionLength = { mode: 'uniform', min: 20, max: 92 };

export interface Target {
  edgeUrl: string;
  authority: AuthorityClient;
  mock: MockControl;
  /** The mock's OpenAI base URL as the edge reaches it. */
  upstreamUrl: string;
  /** The stack's own config document, the base of every run's config. */
  baseDocument: Record<string, unknown>;
  /** Model latency: before the first token, and between tokens. */
  firstTokenLatencyMs: number;
  tokenDelayMs: number;
}

export interface RunSpec {
  mode: Mode;
  workers: number;
  batchBudget: number;
  /** `full`: digests, then triage, unregistered use case and unknown team; `digests` only. */
  phases: 'full' | 'digests';
  honourRetryAfter: boolean;
}

interface SideCalls {
  served: number;
  refused: Record<string, number>;
  /** Model requests the mock received for these calls. */
  reachedModel: number;
}

export interface RunResult {
  spec: RunSpec;
  runId: string;
  digests: QueueResult;
  /** Tokens the authority settled for the batch team (its lifetime total, the run's only use). */
  billed: number;
  /** The same, as the provider (the mock) billed it: prompt + every token it sent. */
  providerBilled: number;
  triage?: QueueResult & { upstreamMaxTokens: Array<number | null> };
  unregistered?: SideCalls;
  unknownTeam?: SideCalls;
}

/** One run of the workload against a fresh set of tenants. */
export async function runOnce(t: Target, spec: RunSpec): Promise<RunResult> {
  const run = newRunIdentity();
  await applyRunConfig(t, run, spec);
  const client = (key: string) =>
    new OpenAI({ baseURL: `${t.edgeUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000 });
  const latency = { firstTokenLatencyMs: t.firstTokenLatencyMs, tokenDelayMs: t.tokenDelayMs };

  await t.mock.configure({ ...latency, completion: DIGEST_LENGTH });
  const before = await t.mock.stats();
  const batch = client(run.key.batch);
  const digests = await runQueue(
    60,
    spec.workers,
    (i) => call(batch, digestMessages(i), TEAMS.batch.cap),
    spec.honourRetryAfter,
  );
  const usage = await settled(t.authority, run.tenant.batch);
  const providerBilled = billedBetween(before, await t.mock.stats());
  const result: RunResult = {
    spec,
    runId: run.id,
    digests,
    billed: usage.billedTokens,
    providerBilled,
  };
  if (spec.phases === 'digests') return result;

  await t.mock.configure({ completion: TRIAGE_LENGTH });
  const beforeTriage = await t.mock.stats();
  const support = client(run.key.support);
  // support-bot asks for 4,096 tokens on every call; its use case caps it at 512.
  const triage = await runQueue(24, 4, (i) => call(support, triageMessages(i), 4_096));
  const afterTriage = await t.mock.stats();
  const sent = afterTriage.requests.chatCompletions - beforeTriage.requests.chatCompletions;
  result.triage = {
    ...triage,
    upstreamMaxTokens: afterTriage.recent.slice(-sent).map((r) => r.maxTokens),
  };
  await settled(t.authority, run.tenant.support);

  const finance = client(run.key.finance);
  result.unregistered = await sideCalls(t, () =>
    call(finance, triageMessages(0), 256, { 'x-use-case': 'UC-999' }),
  );
  const stranger = client(`sk-hf-${run.id}-unknown-team`);
  result.unknownTeam = await sideCalls(t, () => call(stranger, triageMessages(0), 256));
  return result;
}

async function applyRunConfig(t: Target, run: RunIdentity, spec: RunSpec): Promise<void> {
  const document = runDocument(t.baseDocument, run, {
    mode: spec.mode,
    batchBudget: spec.batchBudget,
    upstreamUrl: t.upstreamUrl,
  });
  const applied = await t.authority.configApply({ document, source: `experiment:${run.id}` });
  if (!applied.ok) throw new Error(`config.apply: ${applied.error.code}: ${applied.error.message}`);
  // The edge takes the new config from the authority; it knows the run's keys once it has it.
  await waitFor(
    async () => {
      const res = await fetch(`${t.edgeUrl}/v1/models`, {
        headers: { authorization: `Bearer ${run.key.batch}` },
      });
      if (!res.ok) return false;
      const body = (await res.json()) as { data: Array<{ id: string }> };
      return body.data.some((m) => m.id === EXPERIMENT_MODEL);
    },
    { timeoutMs: 30_000, intervalMs: 50, what: `the edge to load run ${run.id}'s config` },
  );
}

/** The tenant's usage once nothing is in flight or held (settles run after the response). */
function settled(authority: AuthorityClient, tenant: string): Promise<TenantUsage> {
  return waitFor(
    async () => {
      const r = await authority.usage({ tenant });
      if (!r.ok) throw new Error(`usage: ${r.error.code}`);
      const u = r.value.tenants[0];
      return u && u.inFlight === 0 && u.windows.every((w) => w.held === 0) ? u : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 50, what: `${tenant} to hold nothing` },
  );
}

/** Six calls one after the other, and how many of them reached the model. */
async function sideCalls(t: Target, one: () => ReturnType<typeof call>): Promise<SideCalls> {
  const before = await t.mock.stats();
  const r = await runQueue(6, 1, () => one());
  const after = await t.mock.stats();
  return {
    served: r.served,
    refused: r.refused,
    reachedModel: after.requests.chatCompletions - before.requests.chatCompletions,
  };
}
