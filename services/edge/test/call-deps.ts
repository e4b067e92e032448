import { compileConfig, HoldfastConfigSchema, natsNames } from '@holdfast/config';
import { startMockUpstream, type BehaviourPatch, type MockUpstream } from '@holdfast/mock-upstream';
import { createLogger } from '@holdfast/runtime';
import { TokenCounter } from '@holdfast/tokenizer';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { authenticate, sha256Hex } from '../src/request/auth.js';
import '../src/types.js';
import type { SurfaceAdapter } from '../src/call/adapter.js';
import type { CallDeps } from '../src/call/deps.js';
import { runCall } from '../src/call/pipeline.js';
import { Calls } from '../src/call/in-flight.js';
import { DEFAULT_OPTIONS } from '../src/env.js';
import { Holds } from '../src/authority/holds.js';
import { EdgeMetrics } from '../src/metrics.js';
import { errorsPlugin } from '../src/plugins/errors.js';
import { zodValidatorCompiler } from '../src/schemas/validate.js';
import { chatAdapter } from '../src/surfaces/chat/adapter.js';
import { ChatRequest } from '../src/surfaces/chat/schema.js';
import { messagesAdapter } from '../src/surfaces/messages/adapter.js';
import { MessagesRequest } from '../src/surfaces/messages/schema.js';
import { responsesAdapter } from '../src/surfaces/responses/adapter.js';
import { ResponsesRequest } from '../src/surfaces/responses/schema.js';
import { UpstreamClient } from '../src/upstream/client.js';
import { MemoryAuthority } from './memory-authority.js';

/** The key of the one tenant of the unit config. */
export const KEY = 'sk-unit-1';

export interface UnitCall {
  /** A fastify app whose routes run the pipeline with `deps` (no edge plugins around it). */
  app: FastifyInstance;
  deps: CallDeps;
  authority: MemoryAuthority;
  upstream: MockUpstream;
  close(): Promise<void>;
}

/**
 * The call pipeline with its dependencies built explicitly: the in-memory authority, a real
 * upstream client against the mock upstream, a real token counter, one tenant (use case
 * ceiling 256) with an OpenAI model and a Claude model. `mock` configures the mock.
 */
export async function unitCall(
  opts: { limit?: number; mock?: BehaviourPatch } = {},
): Promise<UnitCall> {
  const upstream = await startMockUpstream({ port: 0, behaviour: opts.mock });
  const price = { inputPerMTok: 1, outputPerMTok: 2 };
  // Models whose calls may search: web and file search priced per use, what they read allowed.
  const search = {
    price: { ...price, toolUses: { web_search: 10, file_search: 2.5 } },
    upstreamStateAllowanceTokens: 6_000,
  };
  const config = compileConfig(
    HoldfastConfigSchema.parse({
      upstreams: [
        { id: 'openai', baseUrl: upstream.url, maxRetries: 2 },
        { id: 'claude', api: 'anthropic', baseUrl: upstream.url },
        { id: 'dark', baseUrl: 'http://127.0.0.1:9/v1', maxRetries: 0 },
      ],
      models: [
        { id: 'gpt-4o-mini', upstream: 'openai', tokenizer: 'o200k_base', price },
        { id: 'claude-x', upstream: 'claude', tokenizer: 'upstream', price },
        { id: 'gpt-dark', upstream: 'dark', tokenizer: 'o200k_base', price },
        { id: 'gpt-search', upstream: 'openai', tokenizer: 'o200k_base', ...search },
        { id: 'claude-search', upstream: 'claude', tokenizer: 'upstream', ...search },
        // A Chat Completions search model: one search a call ($25 per 1,000), its name the mock's.
        {
          id: 'gpt-4o-search-preview',
          upstream: 'openai',
          tokenizer: 'o200k_base',
          searchModel: true,
          price: { ...price, toolUses: { web_search: 25 } },
        },
      ],
      tenants: [
        {
          id: 'team',
          useCases: [
            {
              id: 'uc',
              maxTokens: 256,
              models: [
                'gpt-4o-mini',
                'claude-x',
                'gpt-dark',
                'gpt-search',
                'claude-search',
                'gpt-4o-search-preview',
              ],
            },
          ],
          keys: [{ id: 'k', sha256: sha256Hex(KEY) }],
        },
      ],
    }),
  );
  const logger = createLogger({ name: 'unit', level: 'silent' });
  const metrics = new EdgeMetrics(new Registry());
  const authority = new MemoryAuthority(opts.limit ?? 1_000_000);
  const holds = new Holds({
    authority,
    js: { publish: () => Promise.reject(new Error('no JetStream in a unit test')) },
    names: natsNames({
      HOLDFAST_EVENTS_STREAM: 'UNIT',
      HOLDFAST_EVENTS_PREFIX: 'unit.events',
      HOLDFAST_AUTHORITY_PREFIX: 'unit.authority',
    }),
    logger,
    metrics,
    timeoutMs: 1_000,
    attempts: 1,
  });
  const options = {
    ...DEFAULT_OPTIONS,
    upstream: { ...DEFAULT_OPTIONS.upstream, retryBaseMs: 1, retryMaxMs: 5 },
  };
  const client = new UpstreamClient({
    logger,
    metrics,
    timeouts: options.upstream,
    retry: options.upstream,
    env: {},
    connections: options.upstream.connections,
    tenantShare: options.upstream.tenantShare,
  });
  const counter = new TokenCounter();
  const deps: CallDeps = {
    authority,
    holds,
    calls: new Calls(),
    upstream: client,
    counter,
    metrics,
    options,
    config: () => config,
    refreshConfig: () => Promise.resolve(),
  };
  const app = Fastify();
  app.setValidatorCompiler(zodValidatorCompiler);
  app.decorate('metrics', metrics);
  app.decorateRequest('caller', null);
  app.decorateRequest('audit', null as never);
  await app.register(errorsPlugin);
  app.addHook('onRequest', (request, _reply, done) => {
    request.audit = {};
    const auth = authenticate(request.headers, config);
    request.caller = auth.ok ? auth.value : null;
    done();
  });
  const route = <B>(path: string, schema: unknown, adapter: SurfaceAdapter<B>, anthropic = false) =>
    app.post(
      path,
      { schema: { body: schema }, config: anthropic ? { errorShape: 'anthropic' } : {} },
      (request, reply) => runCall(deps, request, reply, adapter, request.body as B),
    );
  route('/v1/chat/completions', ChatRequest, chatAdapter);
  route('/v1/responses', ResponsesRequest, responsesAdapter);
  route('/v1/messages', MessagesRequest, messagesAdapter, true);
  await app.ready();
  return {
    app,
    deps,
    authority,
    upstream,
    close: async () => {
      await app.close();
      await client.close();
      await counter.close();
      await upstream.stop();
    },
  };
}
