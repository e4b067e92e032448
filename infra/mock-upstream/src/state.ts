import { Counter, type Registry } from 'prom-client';
import {
  Behaviour,
  FailNext,
  FAILURES,
  toFailure,
  type BehaviourPatch,
  type Failure,
  type FailNextInput,
  type FailureKind,
} from './behaviour.js';
import { CapacityLimiter, type CapacityStats } from './capacity.js';
import { CountGate, type CountingStats } from './counting.js';
import { PromptCache } from './anthropic/cache.js';
import { ReasoningSeal } from './responses/sealed.js';
import { ResponseStore } from './responses/store.js';
import type { Billed } from './usage.js';

/** The model routes: every call on them is logged. */
export type Route = 'chat.completions' | 'embeddings' | 'responses' | 'messages';

/** Every route the stats count on arrival (before auth and validation). */
const REQUEST_COUNTERS = {
  'chat.completions': 'chatCompletions',
  embeddings: 'embeddings',
  models: 'models',
  responses: 'responses',
  'responses.input_tokens': 'responsesInputTokens',
  messages: 'messages',
  'messages.count_tokens': 'messagesCountTokens',
} as const;
export type CountedRoute = keyof typeof REQUEST_COUNTERS;
type RequestCounts = Record<(typeof REQUEST_COUNTERS)[CountedRoute], number>;

/** How a model request ended, as the mock's stats count it. */
export type Outcome =
  | 'completed'
  | 'aborted'
  | 'dropped'
  | 'error_500'
  | 'error_429'
  | 'error_overloaded'
  | 'error_stream'
  | 'rate_limited'
  | 'invalid';

/**
 * One model call as the mock saw it and billed it: the ground truth a test compares a
 * gateway's books against. Token fields are what the provider billed (= the usage it reported,
 * over-reporting included), OpenAI-style: `promptTokens` is all input with the cache counts as
 * parts of it, `completionTokens` all output with `reasoningTokens` as part of it. `actual` is
 * what was really processed and written.
 */
export interface RequestRecord extends Billed {
  /** 1, 2, ... in the order calls ended; `GET /_mock/log?after=seq` pages on it. */
  seq: number;
  id: string;
  route: Route;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** The surface's own length field as received (max_completion_tokens ?? max_tokens, max_output_tokens, max_tokens), null when absent. */
  maxTokens: number | null;
  /** The output each candidate was allowed, after vendor fields (see vendor.ts). */
  outputCap: number;
  /** Vendor length/count fields the request carried (`n_predict`, `options.num_predict`, ...). */
  vendorFields: Record<string, unknown>;
  choices: number;
  /** Candidates generated and billed (`best_of`), >= choices. */
  candidates: number;
  /** OpenAI `user`, Anthropic `metadata.user_id`. */
  endUser: string | null;
  /** The caller's `x-client-request-id` header (a gateway's id for the call), if any. */
  clientRequestId: string | null;
  actual: { promptTokens: number; completionTokens: number };
  outcome: Outcome;
  failure: FailureKind | null;
  /** The surface's own: stop/length, completed/incomplete, end_turn/max_tokens/tool_use... */
  finishReason: string | null;
  at: string;
}

type Totals = Omit<
  Billed,
  'cacheWrite5mTokens' | 'cacheWrite1hTokens' | 'serviceTier' | 'longContext' | 'toolUses'
> & {
  cacheWriteTokens: number;
};

export interface MockStats {
  /** Requests received, by route (before auth and validation). */
  requests: RequestCounts;
  inFlight: number;
  /** Model requests answered in full (a 200 with the whole body or stream). */
  completed: number;
  /** The client closed the connection before the response was complete. */
  abortedByClient: number;
  errorsInjected: Record<FailureKind, number>;
  /** Sum of the `usage` objects sent (bodies, and stream usage events when sent). */
  usage: Totals & { totalTokens: number };
  /**
   * What a provider would charge: the prompt and every token written, also for streams that
   * were aborted or dropped midway and streams without a usage chunk. Non-streaming replies
   * whose client left are charged in full (the model finished them). Errors are free.
   */
  billed: Totals;
  billedByRoute: Record<Route, Totals & { calls: number }>;
  /** The account limit: arrivals per minute, the peak of any 60 s, 429s sent. */
  capacity: CapacityStats;
  /** The counting endpoints (count_tokens, input_tokens): open, most open at once, 429s. */
  counting: CountingStats;
  /** The call log, oldest first (the last `logLimit` calls). */
  recent: RequestRecord[];
}

const zeroTotals = (): Totals => ({
  promptTokens: 0,
  completionTokens: 0,
  cachedTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0,
  audioPromptTokens: 0,
  audioCompletionTokens: 0,
});

function emptyStats(capacity: CapacityStats): MockStats {
  return {
    requests: Object.fromEntries(
      Object.values(REQUEST_COUNTERS).map((k) => [k, 0]),
    ) as RequestCounts,
    inFlight: 0,
    completed: 0,
    abortedByClient: 0,
    errorsInjected: Object.fromEntries(FAILURES.map((f) => [f, 0])) as Record<FailureKind, number>,
    usage: { ...zeroTotals(), totalTokens: 0 },
    billed: zeroTotals(),
    billedByRoute: {
      'chat.completions': { ...zeroTotals(), calls: 0 },
      embeddings: { ...zeroTotals(), calls: 0 },
      responses: { ...zeroTotals(), calls: 0 },
      messages: { ...zeroTotals(), calls: 0 },
    },
    capacity,
    counting: { inFlight: 0, peakInFlight: 0, rejected: 0 },
    recent: [],
  };
}

function add(into: Totals, b: Billed): void {
  into.promptTokens += b.promptTokens;
  into.completionTokens += b.completionTokens;
  into.cachedTokens += b.cachedTokens;
  into.cacheWriteTokens += b.cacheWrite5mTokens + b.cacheWrite1hTokens;
  into.reasoningTokens += b.reasoningTokens;
  into.audioPromptTokens += b.audioPromptTokens;
  into.audioCompletionTokens += b.audioCompletionTokens;
}

/** The mock's mutable state: behaviour, queued failures, stores, the call log and statistics. */
export class MockState {
  behaviour: Behaviour;
  readonly capacity = new CapacityLimiter();
  readonly counting = new CountGate();
  readonly responses = new ResponseStore();
  /** Seals reasoning items' encrypted content; drawn at start, kept across resets. */
  readonly seal = new ReasoningSeal();
  readonly promptCache = new PromptCache();
  private readonly initial: Behaviour;
  private queue: { failure: Failure; remaining: number }[] = [];
  private stats: MockStats;
  private nextId = 1;
  /** Calls served at priority so far (downgradePriority takes its share of them in turn). */
  private priorityCalls = 0;
  private nextSeq = 1;
  private readonly outcomes: Counter<'route' | 'outcome'>;
  private readonly tokens: Counter<'kind'>;

  constructor(initial: Behaviour, registry: Registry) {
    this.initial = Behaviour.parse(initial);
    this.behaviour = this.initial;
    this.capacity.configure(this.behaviour.capacity);
    this.counting.configure(this.behaviour.counting);
    this.stats = emptyStats(this.capacity.snapshot());
    this.outcomes = new Counter({
      name: 'mock_upstream_requests_total',
      help: 'Model requests by route and outcome',
      labelNames: ['route', 'outcome'],
      registers: [registry],
    });
    this.tokens = new Counter({
      name: 'mock_upstream_billed_tokens_total',
      help: 'Tokens a provider would bill, by kind',
      labelNames: ['kind'],
      registers: [registry],
    });
  }

  configure(patch: BehaviourPatch): Behaviour {
    this.behaviour = Behaviour.parse({ ...this.behaviour, ...patch });
    this.capacity.configure(this.behaviour.capacity);
    this.counting.configure(this.behaviour.counting);
    return this.behaviour;
  }

  failNext(input: FailNextInput): number {
    const spec = FailNext.parse(input);
    this.queue.push({ failure: toFailure(spec), remaining: spec.count });
    return this.queue.reduce((n, q) => n + q.remaining, 0);
  }

  /** The next queued failure, if any; consumes one. */
  takeFailure(): Failure | undefined {
    const head = this.queue[0];
    if (!head) return undefined;
    head.remaining -= 1;
    if (head.remaining === 0) this.queue.shift();
    return head.failure;
  }

  /** Startup behaviour back; no queued failures, stored responses, cache or statistics. */
  reset(): void {
    this.behaviour = this.initial;
    this.capacity.configure(this.behaviour.capacity);
    this.capacity.reset();
    this.counting.configure(this.behaviour.counting);
    this.counting.reset();
    this.responses.clear();
    this.promptCache.clear();
    this.queue = [];
    this.priorityCalls = 0;
    const inFlight = this.stats.inFlight;
    this.stats = emptyStats(this.capacity.snapshot());
    this.stats.inFlight = inFlight;
  }

  /**
   * Whether the next call served at priority is downgraded: in turn, so that of n such calls
   * floor(n x downgradePriority) are.
   */
  downgradePriority(): boolean {
    const share = this.behaviour.downgradePriority;
    this.priorityCalls += 1;
    return Math.floor(this.priorityCalls * share) > Math.floor((this.priorityCalls - 1) * share);
  }

  requestId(): string {
    return `mock-${this.nextId++}`;
  }

  received(route: CountedRoute): void {
    this.stats.requests[REQUEST_COUNTERS[route]] += 1;
  }

  started(failure: Failure | undefined): void {
    this.stats.inFlight += 1;
    if (failure) this.stats.errorsInjected[failure.kind] += 1;
  }

  /**
   * Records how a model call ended. `billed`: a provider charges it (it reached the model);
   * `reported`: its usage object was sent. A call refused before it started (`rate_limited`)
   * was never `started`.
   */
  finished(record: Omit<RequestRecord, 'seq'>, billed: boolean, reported: boolean): void {
    const s = this.stats;
    if (record.outcome !== 'rate_limited') s.inFlight = Math.max(0, s.inFlight - 1);
    if (record.outcome === 'completed') s.completed += 1;
    if (record.outcome === 'aborted') s.abortedByClient += 1;
    if (billed) {
      add(s.billed, record);
      const byRoute = s.billedByRoute[record.route];
      add(byRoute, record);
      byRoute.calls += 1;
      this.tokens.inc({ kind: 'prompt' }, record.promptTokens);
      this.tokens.inc({ kind: 'completion' }, record.completionTokens);
    }
    if (reported) {
      add(s.usage, record);
      s.usage.totalTokens += record.promptTokens + record.completionTokens;
    }
    s.recent.push({ seq: this.nextSeq++, ...record });
    if (s.recent.length > this.behaviour.logLimit) s.recent.shift();
    this.outcomes.inc({ route: record.route, outcome: record.outcome });
  }

  snapshot(): MockStats {
    return structuredClone({
      ...this.stats,
      capacity: this.capacity.snapshot(),
      counting: this.counting.snapshot(),
    });
  }

  /** Call records after `seq`, oldest first. */
  log(after: number): RequestRecord[] {
    return structuredClone(this.stats.recent.filter((r) => r.seq > after));
  }
}
