import { createLogger, createRegistry, type Logger } from '@holdfast/runtime';
import { loadTokenizer } from '@holdfast/tokenizer';
import type { Registry } from 'prom-client';
import { buildApp } from './app.js';
import { Behaviour, BehaviourPatch, DEFAULT_BEHAVIOUR, type FailNextInput } from './behaviour.js';
import { MockState, type MockStats } from './state.js';

const DEFAULT_PORT = 8089;

export interface MockUpstreamOptions {
  /** Default 8089; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** When set, `/v1/*` answers 401 without `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Startup behaviour (the state `reset()` returns to); defaults in DEFAULT_BEHAVIOUR. */
  behaviour?: BehaviourPatch;
  /** Default: a silent logger. */
  logger?: Logger;
  registry?: Registry;
}

export interface MockUpstream {
  /** Base URL for an OpenAI client, e.g. `http://127.0.0.1:8089/v1`. */
  url: string;
  port: number;
  stats(): MockStats;
  /** Startup behaviour back, queued failures dropped, statistics zeroed. */
  reset(): void;
  configure(patch: BehaviourPatch): Behaviour;
  /** The next `count` model requests fail this way; returns how many failures are queued. */
  failNext(spec: FailNextInput): number;
  stop(): Promise<void>;
}

/** Starts the mock OpenAI-compatible upstream (in-process, for tests, or from main.ts). */
export async function startMockUpstream(opts: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const logger = opts.logger ?? createLogger({ name: 'mock-upstream', level: 'silent' });
  const registry = opts.registry ?? createRegistry('mock-upstream');
  const state = new MockState(
    Behaviour.parse({ ...DEFAULT_BEHAVIOUR, ...opts.behaviour }),
    registry,
  );
  // The default encoding, so the first request does not pay for loading it.
  await loadTokenizer('o200k_base');
  const app = buildApp({ state, logger, registry, apiKey: opts.apiKey });
  const host = opts.host ?? '127.0.0.1';
  await app.listen({ host, port: opts.port ?? DEFAULT_PORT });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : (opts.port ?? DEFAULT_PORT);
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return {
    url: `http://${reachable}:${port}/v1`,
    port,
    stats: () => state.snapshot(),
    reset: () => state.reset(),
    configure: (patch) => state.configure(BehaviourPatch.parse(patch)),
    failNext: (spec) => state.failNext(spec),
    stop: () => app.close(),
  };
}
