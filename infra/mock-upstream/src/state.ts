import { Counter, type Registry } from 'prom-client';
import {
  Behaviour,
  FailNext,
  toFailure,
  type BehaviourPatch,
  type Failure,
  type FailNextInput,
  type FailureKind,
} from './behaviour.js';

export type Route = 'chat.completions' | 'embeddings';

/** How a model request ended, as the mock's stats count it. */
export type Outcome = 'completed' | 'aborted' | 'dropped' | 'error_500' | 'error_429' | 'invalid';

/** One model request as the mock saw it; the last 200 are kept for tests. */
export interface RequestRecord {
  id: string;
  route: Route;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** max_completion_tokens ?? max_tokens as received, null when absent. */
  maxTokens: number | null;
  promptTokens: number;
  /** Content tokens actually sent (all choices). */
  completionTokens: number;
  outcome: Outcome;
  failure: FailureKind | null;
  finishReason: 'stop' | 'length' | null;
  at: string;
}

export interface MockStats {
  /** Requests received, by route (before auth and validation). */
  requests: { chatCompletions: number; embeddings: number; models: number };
  inFlight: number;
  /** Model requests answered in full (a 200 with the whole body or stream). */
  completed: number;
  /** The client closed the connection before the response was complete. */
  abortedByClient: number;
  errorsInjected: Record<FailureKind, number>;
  /** Sum of the `usage` objects sent (bodies, and stream usage chunks when asked for). */
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
  /**
   * What a provider would charge: the prompt and every token sent, also for streams that were
   * aborted or dropped midway and streams without a usage chunk. Non-streaming replies whose
   * client left are charged in full (the model finished them). Errors are free.
   */
  billed: { promptTokens: number; completionTokens: number };
  recent: RequestRecord[];
}

const RECENT = 200;

function emptyStats(): MockStats {
  return {
    requests: { chatCompletions: 0, embeddings: 0, models: 0 },
    inFlight: 0,
    completed: 0,
    abortedByClient: 0,
    errorsInjected: { '500': 0, '429': 0, hang: 0, drop: 0 },
    usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    billed: { promptTokens: 0, completionTokens: 0 },
    recent: [],
  };
}

/** The mock's mutable state: behaviour, queued failures and statistics. */
export class MockState {
  behaviour: Behaviour;
  private readonly initial: Behaviour;
  private queue: { failure: Failure; remaining: number }[] = [];
  private stats = emptyStats();
  private nextId = 1;
  private readonly outcomes: Counter<'route' | 'outcome'>;
  private readonly tokens: Counter<'kind'>;

  constructor(initial: Behaviour, registry: Registry) {
    this.initial = Behaviour.parse(initial);
    this.behaviour = this.initial;
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

  /** Startup behaviour back, no queued failures, zeroed statistics. */
  reset(): void {
    this.behaviour = this.initial;
    this.queue = [];
    const inFlight = this.stats.inFlight;
    this.stats = emptyStats();
    this.stats.inFlight = inFlight;
  }

  requestId(): string {
    return `mock-${this.nextId++}`;
  }

  received(route: Route | 'models'): void {
    const key = route === 'chat.completions' ? 'chatCompletions' : route;
    this.stats.requests[key] += 1;
  }

  started(failure: Failure | undefined): void {
    this.stats.inFlight += 1;
    if (failure) this.stats.errorsInjected[failure.kind] += 1;
  }

  /** Records how a model request ended; `reported` is the usage object sent, if one was. */
  finished(record: RequestRecord, billed: boolean, reported: boolean): void {
    const s = this.stats;
    s.inFlight = Math.max(0, s.inFlight - 1);
    if (record.outcome === 'completed') s.completed += 1;
    if (record.outcome === 'aborted') s.abortedByClient += 1;
    if (billed) {
      s.billed.promptTokens += record.promptTokens;
      s.billed.completionTokens += record.completionTokens;
      this.tokens.inc({ kind: 'prompt' }, record.promptTokens);
      this.tokens.inc({ kind: 'completion' }, record.completionTokens);
    }
    if (reported) {
      s.usage.promptTokens += record.promptTokens;
      s.usage.completionTokens += record.completionTokens;
      s.usage.totalTokens += record.promptTokens + record.completionTokens;
    }
    s.recent.push(record);
    if (s.recent.length > RECENT) s.recent.shift();
    this.outcomes.inc({ route: record.route, outcome: record.outcome });
  }

  snapshot(): MockStats {
    return structuredClone(this.stats);
  }
}
