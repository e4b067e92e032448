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

/** Where poison messages go (not covered by the events stream's filter). */
export function deadLetterSubject(names: NatsNames, consumer: string): string {
  return `${names.eventsPrefix.replace(/\.events$/, '')}.deadletter.${consumer}`;
}

/** Derives isolated names from a short token, for tests and parallel deployments. */
export function namesWithPrefix(token: string): NatsNames {
  return {
    eventsStream: `${token.toUpperCase()}_EVENTS`,
    eventsPrefix: `${token}.events`,
    authorityPrefix: `${token}.authority.v1`,
  };
}
