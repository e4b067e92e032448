import { readDeadLetterHeaders, type DeadLetterInfo } from '@holdfast/events';
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from '@nats-io/jetstream';

export interface StoredDeadLetter extends DeadLetterInfo {
  /** Its sequence in the dead-letter stream. */
  seq: number;
  time: string;
  /** `<base>.deadletter.<source>`. */
  deadLetterSubject: string;
  /** The original bytes. */
  data: Uint8Array;
}

/**
 * The newest `last` dead letters of a dead-letter stream, oldest first, optionally only those
 * of one source. For an operator's look (`holdfast dead-letters`) and
 * for tests; it reads message by message, which suits a stream that should stay small.
 */
export async function readDeadLetters(
  jsm: JetStreamManager,
  stream: string,
  opts: { last?: number; source?: string } = {},
): Promise<StoredDeadLetter[]> {
  const { state } = await jsm.streams.info(stream);
  const out: StoredDeadLetter[] = [];
  const last = opts.last ?? 100;
  for (let seq = state.last_seq; seq >= state.first_seq && out.length < last; seq--) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch((err: unknown) => {
      // A deleted message leaves a gap in the sequence.
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound) {
        return null;
      }
      throw err;
    });
    if (!m || (opts.source && !m.subject.endsWith(`.${opts.source}`))) continue;
    out.push({
      ...readDeadLetterHeaders((name) => m.header.get(name)),
      seq: m.seq,
      time: m.time.toISOString(),
      deadLetterSubject: m.subject,
      data: m.data,
    });
  }
  return out.reverse();
}
