import type { EventType } from './envelope.js';

/**
 * NATS names. Every name has a prefix so tests (and several deployments on one NATS) stay
 * apart; production uses the defaults.
 */
export const DEFAULT_NAMES = {
  /** JetStream stream that holds every event. */
  eventsStream: 'HOLDFAST_EVENTS',
  /** Events are published on `<eventsPrefix>.<tenant>.<type>`. */
  eventsPrefix: 'holdfast.events',
  /** The authority answers on `<authorityPrefix>.<operation>`. */
  authorityPrefix: 'holdfast.authority.v1',
} as const;

export interface NatsNames {
  eventsStream: string;
  eventsPrefix: string;
  authorityPrefix: string;
}

export function eventSubject(names: NatsNames, tenant: string, type: EventType): string {
  return `${names.eventsPrefix}.${tenant}.${type}`;
}

/** The filter that matches every event (`holdfast.events.>`). */
export function allEventsSubject(names: NatsNames): string {
  return `${names.eventsPrefix}.>`;
}

function deadLetterPrefix(names: NatsNames): string {
  return `${names.eventsPrefix.replace(/\.events$/, '')}.deadletter`;
}

/** Where a consumer puts poison messages (kept by the dead-letter stream, not the events one). */
export function deadLetterSubject(names: NatsNames, consumer: string): string {
  return `${deadLetterPrefix(names)}.${consumer}`;
}

/** The stream that keeps every dead letter (`HOLDFAST_EVENTS_DEADLETTER`) and its subjects. */
export function deadLetterStream(names: NatsNames): { name: string; subjects: string[] } {
  return { name: `${names.eventsStream}_DEADLETTER`, subjects: [`${deadLetterPrefix(names)}.>`] };
}

/**
 * Where an edge leaves a settle or release the authority could not take when it was made
 * (authority down, Redis down): a work-queue stream the authority drains once it is back, so
 * real usage is billed late instead of lost. Subjects `<authorityPrefix>.closes.<org>`.
 */
export function closesStream(names: NatsNames): { name: string; subjects: string[] } {
  return { name: `${names.eventsStream}_CLOSES`, subjects: [`${names.authorityPrefix}.closes.>`] };
}

export function closeSubject(names: NatsNames, org: string): string {
  return `${names.authorityPrefix}.closes.${org}`;
}

/**
 * Where an authority replica says, once it serves, that it has started (no body), and again
 * each time its Redis connection is back. An edge that owes settles or releases (the authority
 * or its Redis was away) sends them at once instead of waiting out the rest of its backoff step.
 */
export function authorityStartedSubject(names: NatsNames): string {
  return `${names.authorityPrefix}.started`;
}

/** Derives isolated names from a short token, for tests and parallel deployments. */
export function namesWithPrefix(token: string): NatsNames {
  return {
    eventsStream: `${token.toUpperCase()}_EVENTS`,
    eventsPrefix: `${token}.events`,
    authorityPrefix: `${token}.authority.v1`,
  };
}
