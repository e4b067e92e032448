import { StringDecoder } from 'node:string_decoder';

/** Largest line the parser buffers; an upstream sending more without a newline is broken. */
const MAX_LINE_CHARS = 16 * 1024 * 1024;

/** One Server-Sent Event: its `event` name (Anthropic and Responses streams name them) and data. */
export interface SseEvent {
  event: string | undefined;
  data: string;
}

/**
 * Incremental Server-Sent Events parser: feed it bytes as they arrive, get every complete
 * event. Comments and other fields are skipped; an event cut off by the end of the stream is
 * dropped (it never completed).
 */
export class SseParser {
  /**
   * Node's StringDecoder, not TextDecoder: the same text for any bytes split anywhere (invalid
   * bytes become U+FFFD alike; sse.unit.test.ts), at about half the CPU a reply (issue 14,
   * docs/benchmarks.md). TextDecoder drops a byte order mark at the stream's start, so does
   * `push`.
   */
  readonly #decoder = new StringDecoder('utf8');
  /** Nothing decoded yet: a BOM first is dropped. */
  #atStart = true;
  /**
   * What came after the last newline. A chunk without a newline is appended unsearched (V8
   * joins the strings only when they are read): a long line is neither searched nor copied
   * again at every chunk (one 12 MB event in 64 KB chunks was quadratic: every chunk flattened
   * and searched it whole, 1.6 s of CPU).
   */
  #rest = '';
  /** The event's data lines so far, joined by newlines (undefined: none yet). */
  #data: string | undefined;
  #event: string | undefined;

  push(chunk: Uint8Array): SseEvent[] {
    let text = this.#decoder.write(chunk);
    if (this.#atStart && text.length > 0) {
      this.#atStart = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    const first = text.indexOf('\n');
    if (first < 0) {
      if (text.length > 0) this.#keep(text);
      return [];
    }
    const before = this.#rest.length;
    const buffer = before === 0 ? text : this.#rest + text;
    this.#rest = '';
    const events: SseEvent[] = [];
    let start = 0;
    // indexOf, not the known position: it flattens the joined strings once for the reads below.
    for (let nl = buffer.indexOf('\n', before + first); nl >= 0; nl = buffer.indexOf('\n', start)) {
      const end = nl > start && buffer.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      this.#line(buffer.slice(start, end), events);
      start = nl + 1;
    }
    if (start < buffer.length) this.#keep(buffer.slice(start));
    return events;
  }

  #keep(text: string): void {
    this.#rest += text;
    if (this.#rest.length > MAX_LINE_CHARS) {
      throw new Error(`upstream SSE line longer than ${MAX_LINE_CHARS} characters`);
    }
  }

  #line(line: string, events: SseEvent[]): void {
    if (line === '') {
      if (this.#data !== undefined) events.push({ event: this.#event, data: this.#data });
      this.#data = undefined;
      this.#event = undefined;
      return;
    }
    if (line.startsWith('data:')) {
      const data = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
      // A single line (every chunk of the providers') is its data as it is: no array, no join.
      this.#data = this.#data === undefined ? data : `${this.#data}\n${data}`;
    } else if (line.startsWith('event:')) {
      this.#event = line.charCodeAt(6) === 32 ? line.slice(7) : line.slice(6);
    }
  }
}

/** One SSE event carrying JSON (or `[DONE]`), with its event name when it has one. */
export function sseEvent(data: string, event?: string): string {
  return event === undefined ? `data: ${data}\n\n` : `event: ${event}\ndata: ${data}\n\n`;
}
