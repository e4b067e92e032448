import { LATENCY_BUCKETS } from '@holdfast/runtime';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The authority's Prometheus metrics. */
export class AuthorityMetrics {
  readonly requests: Counter<'op' | 'outcome'>;
  readonly latency: Histogram<'op'>;
  readonly batchSize: Histogram;
  readonly admissions: Counter<'outcome' | 'code'>;
  readonly closes: Counter<'op' | 'status'>;
  /** Acked closes the closes stream kept below its consumer's ack floor, purged. */
  readonly closesPurged: Counter;
  readonly extensions: Counter<'status'>;
  readonly overruns: Counter;
  readonly overrunTokens: Counter;
  readonly refusalsSummarised: Counter;
  readonly refusalsReported: Counter;
  readonly published: Counter;
  readonly relayErrors: Counter;
  readonly holdsOutstanding: Gauge;
  readonly outboxPending: Gauge;

  constructor(
    registry: Registry,
    collect: { holds: () => Promise<number>; outbox: () => Promise<number> },
  ) {
    this.requests = new Counter({
      name: 'holdfast_authority_requests_total',
      help: 'Requests answered, by operation and outcome (ok or an error code).',
      labelNames: ['op', 'outcome'],
      registers: [registry],
    });
    this.latency = new Histogram({
      name: 'holdfast_authority_request_duration_seconds',
      help: 'Time from receiving a request to sending its reply.',
      labelNames: ['op'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
    this.batchSize = new Histogram({
      name: 'holdfast_authority_batch_items',
      help: 'Requests carried by each batch message (an edge sends what it asks for in one turn together).',
      buckets: [2, 4, 8, 16, 32, 64],
      registers: [registry],
    });
    this.admissions = new Counter({
      name: 'holdfast_authority_admissions_total',
      help: 'Admission decisions, by outcome (admitted, refused) and refusal code.',
      labelNames: ['outcome', 'code'],
      registers: [registry],
    });
    this.closes = new Counter({
      name: 'holdfast_authority_closes_total',
      help: 'Settle/release/expire results, by operation and status.',
      labelNames: ['op', 'status'],
      registers: [registry],
    });
    this.closesPurged = new Counter({
      name: 'holdfast_authority_closes_purged_total',
      help: "Closes the closes stream kept after its consumer acked them (below the consumer's ack floor: a delete that died with a killed stream leader), purged.",
      registers: [registry],
    });
    this.extensions = new Counter({
      name: 'holdfast_authority_extensions_total',
      help: 'Hold extensions (adaptive mode), by status.',
      labelNames: ['status'],
      registers: [registry],
    });
    this.overruns = new Counter({
      name: 'holdfast_authority_overruns_total',
      help: 'Settlements that billed more than their hold (reservation.overrun events).',
      registers: [registry],
    });
    this.overrunTokens = new Counter({
      name: 'holdfast_authority_overrun_tokens_total',
      help: 'Tokens billed above their holds, summed over every overrun.',
      registers: [registry],
    });
    this.refusalsSummarised = new Counter({
      name: 'holdfast_authority_refusal_summaries_total',
      help: 'Summary admission.refused events written for refusals past the event rate.',
      registers: [registry],
    });
    this.refusalsReported = new Counter({
      name: 'holdfast_authority_edge_refusals_total',
      help: 'Refusals edges answered themselves (a repeat of a budget refusal), counted into the summaries.',
      registers: [registry],
    });
    this.published = new Counter({
      name: 'holdfast_authority_events_published_total',
      help: 'Events relayed from the outbox to JetStream.',
      registers: [registry],
    });
    this.relayErrors = new Counter({
      name: 'holdfast_authority_relay_errors_total',
      help: 'Relay rounds that failed (the events stay in the outbox and are retried).',
      registers: [registry],
    });
    this.holdsOutstanding = new Gauge({
      name: 'holdfast_authority_holds_outstanding',
      help: 'Reservations held right now, across every tenant.',
      registers: [registry],
      async collect() {
        this.set(await collect.holds().catch(() => NaN));
      },
    });
    this.outboxPending = new Gauge({
      name: 'holdfast_authority_outbox_pending',
      help: 'Events written to the outbox and not yet relayed to JetStream.',
      registers: [registry],
      async collect() {
        this.set(await collect.outbox().catch(() => NaN));
      },
    });
  }
}
