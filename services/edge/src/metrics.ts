import { LATENCY_BUCKETS } from '@holdfast/runtime';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The edge's Prometheus metrics (GET /metrics on the edge port). */
export class EdgeMetrics {
  readonly requests: Counter<'route' | 'status' | 'code'>;
  readonly admission: Histogram<'outcome'>;
  readonly upstreamFirstByte: Histogram<'upstream' | 'outcome'>;
  readonly upstreamDuration: Histogram<'upstream' | 'outcome'>;
  readonly upstreamRetries: Counter<'upstream' | 'reason'>;
  readonly upstreamShareRefusals: Counter<'tenant'>;
  readonly upstreamCountsLimited: Counter<'upstream'>;
  readonly slowClients: Counter<'tenant'>;
  readonly localRefusals: Counter<'tenant'>;
  readonly tokens: Counter<'kind' | 'model' | 'api'>;
  readonly holdsClosed: Counter<'how' | 'outcome'>;
  readonly holdCloseFailures: Counter<'how'>;
  readonly holdsDeferred: Counter<'how'>;
  readonly closesPending: Gauge;
  readonly outputCuts: Counter<'model' | 'why'>;
  readonly earlyRefusals: Counter<'code'>;
  readonly slowRequests: Counter;
  readonly droppedConnections: Counter;
  readonly inFlight: Gauge;
  readonly unmetered: Counter<'tenant'>;
  readonly extensions: Counter<'status'>;
  readonly countWait: Histogram<'tenant'>;
  readonly countQueueDepth: Gauge<'tenant'>;
  readonly countQueueChars: Gauge<'tenant'>;
  readonly countTimeouts: Counter<'tenant'>;
  readonly countRefusals: Counter<'tenant'>;
  readonly intakeWait: Histogram<'tenant'>;
  #countQueues: () => ReadonlyMap<string, CountQueue> = () => new Map();
  #intakeQueues: () => ReadonlyMap<string, number> = () => new Map();
  #openBodies: () => number = () => 0;

  constructor(registry: Registry) {
    const registers = [registry];
    // Read at scrape time; reset first, so a tenant whose queue emptied leaves the series.
    const queues = () => this.#countQueues();
    this.countWait = new Histogram({
      name: 'edge_count_queue_wait_seconds',
      help: "Time a prompt count waited in its tenant's queue for a counting worker, by tenant",
      labelNames: ['tenant'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.countQueueDepth = new Gauge({
      name: 'edge_count_queue_depth',
      help: 'Prompt counts waiting for a counting worker, by tenant',
      labelNames: ['tenant'],
      registers,
      collect() {
        this.reset();
        for (const [tenant, q] of queues()) this.set({ tenant }, q.waiting);
      },
    });
    this.countQueueChars = new Gauge({
      name: 'edge_count_queue_chars',
      help: 'Characters of prompts waiting or being counted in the worker pool, by tenant (EDGE_COUNT_QUEUE_CHARS bounds it)',
      labelNames: ['tenant'],
      registers,
      collect() {
        this.reset();
        for (const [tenant, q] of queues()) this.set({ tenant }, q.chars);
      },
    });
    this.countTimeouts = new Counter({
      name: 'edge_count_timeouts_total',
      help: 'Prompt counts that ran past EDGE_COUNT_TIMEOUT_MS and were counted with the estimate bound, by tenant',
      labelNames: ['tenant'],
      registers,
    });
    this.countRefusals = new Counter({
      name: 'edge_count_refusals_total',
      help: 'Calls refused (429 concurrency_limit) because their tenant had EDGE_COUNT_QUEUE_CHARS in the pool, by tenant',
      labelNames: ['tenant'],
      registers,
    });
    const intake = () => this.#intakeQueues();
    this.intakeWait = new Histogram({
      name: 'edge_intake_wait_seconds',
      help: 'Time a request body above EDGE_INTAKE_INLINE_BYTES waited for its turn to be parsed, by tenant',
      labelNames: ['tenant'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    new Gauge({
      name: 'edge_intake_queue_depth',
      help: 'Request bodies waiting for their turn to be parsed, by tenant',
      labelNames: ['tenant'],
      registers,
      collect() {
        this.reset();
        for (const [tenant, n] of intake()) this.set({ tenant }, n);
      },
    });
    const openBodies = () => this.#openBodies();
    new Gauge({
      name: 'edge_open_body_bytes',
      help: 'Request bodies open on this edge, bytes: each at its content-length (the body limit when it has none) from its headers until its response closes, with what its streamed reply keeps waiting for its client (EDGE_OPEN_BODY_BYTES bounds it)',
      registers,
      collect() {
        this.set(openBodies());
      },
    });
    this.extensions = new Counter({
      name: 'edge_hold_extensions_total',
      help: 'Hold extensions asked of the authority (adaptive mode), by answer',
      labelNames: ['status'],
      registers,
    });
    this.requests = new Counter({
      name: 'edge_http_requests_total',
      help: 'HTTP requests by route, status and error code ("" when none)',
      labelNames: ['route', 'status', 'code'],
      registers,
    });
    this.admission = new Histogram({
      name: 'edge_admission_seconds',
      help: 'Time of the admit request to the authority, by outcome',
      labelNames: ['outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.upstreamFirstByte = new Histogram({
      name: 'edge_upstream_first_byte_seconds',
      help: 'Time from sending a request upstream to its response headers',
      labelNames: ['upstream', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.upstreamDuration = new Histogram({
      name: 'edge_upstream_duration_seconds',
      help: 'Time to an upstream answer over all attempts and fallbacks, by final outcome',
      labelNames: ['upstream', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.upstreamShareRefusals = new Counter({
      name: 'edge_upstream_share_refusals_total',
      help: 'Upstream attempts refused because the tenant held its share of the connections to that upstream (EDGE_UPSTREAM_TENANT_SHARE_PERCENT), by tenant',
      labelNames: ['tenant'],
      registers,
    });
    this.slowClients = new Counter({
      name: 'edge_slow_clients_total',
      help: "Streaming calls ended because their client left more than EDGE_STREAM_LAG_BYTES of the reply unread, or more than its tenant's open bytes (EDGE_TENANT_OPEN_BODY_BYTES) or the edge's allow, by tenant",
      labelNames: ['tenant'],
      registers,
    });
    this.upstreamCountsLimited = new Counter({
      name: 'edge_upstream_counts_limited_total',
      help: "Prompt counts an upstream's counting endpoint refused with 429, or that were not asked because it had (until its Retry-After) or the team had taken its share of the upstream's countsPerMinute, by upstream",
      labelNames: ['upstream'],
      registers,
    });
    this.localRefusals = new Counter({
      name: 'edge_local_refusals_total',
      help: 'Calls the edge refused itself, a repeat of a budget refusal the authority made moments before (EDGE_REFUSAL_MEMORY_MS), by tenant; each is counted into an admission.refused event',
      labelNames: ['tenant'],
      registers,
    });
    this.upstreamRetries = new Counter({
      name: 'edge_upstream_retries_total',
      help: 'Upstream attempts retried, by reason (429, 5xx, connect)',
      labelNames: ['upstream', 'reason'],
      registers,
    });
    this.tokens = new Counter({
      name: 'edge_tokens_total',
      help: 'Tokens settled by the edge, by kind (prompt, completion), model and surface (api)',
      labelNames: ['kind', 'model', 'api'],
      registers,
    });
    this.holdsClosed = new Counter({
      name: 'edge_holds_closed_total',
      help: 'Holds settled or released, by outcome or reason',
      labelNames: ['how', 'outcome'],
      registers,
    });
    this.holdCloseFailures = new Counter({
      name: 'edge_hold_close_failures_total',
      help: 'Settles/releases refused by the authority or lost at shutdown (the lease expires them)',
      labelNames: ['how'],
      registers,
    });
    this.holdsDeferred = new Counter({
      name: 'edge_holds_deferred_total',
      help: 'Settles/releases the authority did not take, left in the closes stream for it',
      labelNames: ['how'],
      registers,
    });
    this.closesPending = new Gauge({
      name: 'edge_hold_closes_pending',
      help: 'Settles/releases neither taken by the authority nor in the closes stream yet: the ledger lacks them (a hold that expired meanwhile is billed at its worst case until its close lands)',
      registers,
    });
    this.outputCuts = new Counter({
      name: 'edge_output_cuts_total',
      help: 'Calls the edge ended at their admitted output (the upstream wrote past it), by model',
      labelNames: ['model', 'why'],
      registers,
    });
    this.earlyRefusals = new Counter({
      name: 'edge_early_refusals_total',
      help: "Calls refused by the edge on their headers, before their body is read (the tenant's in-flight cap, the bounds on open body bytes), by code",
      labelNames: ['code'],
      registers,
    });
    this.slowRequests = new Counter({
      name: 'edge_slow_requests_total',
      help: 'Connections closed because a request had not arrived within EDGE_REQUEST_TIMEOUT_MS',
      registers,
    });
    this.droppedConnections = new Counter({
      name: 'edge_dropped_connections_total',
      help: 'Client connections closed as they were accepted: EDGE_MAX_CONNECTIONS were open',
      registers,
    });
    this.inFlight = new Gauge({
      name: 'edge_calls_in_flight',
      help: 'Admitted calls not yet settled or released',
      registers,
    });
    this.unmetered = new Counter({
      name: 'edge_unmetered_calls_total',
      help: 'Calls served without a reservation (failOpen tenant, authority unreachable)',
      labelNames: ['tenant'],
      registers,
    });
  }

  /** Where the open body bytes gauge is read when /metrics is scraped. */
  watchOpenBodies(bytes: () => number): void {
    this.#openBodies = bytes;
  }

  /** Where the intake's queue gauge is read when /metrics is scraped. */
  watchIntake(queues: () => ReadonlyMap<string, number>): void {
    this.#intakeQueues = queues;
  }

  /** Where the count queue gauges are read when /metrics is scraped (the token counter). */
  watchCounting(queues: () => ReadonlyMap<string, CountQueue>): void {
    this.#countQueues = queues;
  }
}

/** One tenant's counts in the pool, as the token counter reports them. */
interface CountQueue {
  waiting: number;
  chars: number;
}
