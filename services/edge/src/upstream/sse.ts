/** Largest line the parser buffers; an upstream sending more without a newline is broken. */
const MAX_LINE_CHARS = 16 * 1024 * 1024;

/**
 * Incremental Server-Sent Events parser for OpenAI streams: feed it bytes as they arrive, get
 * the `data` payload of every complete event. Comments and other fields are skipped; an event
 * cut off by the end of the stream is dropped (it never completed).
 */
export class SseParser {
  readonly #decoder = new TextDecoder();
  #buffer = '';
  #data: string[] = [];

  push(chunk: Uint8Array): string[] {
    this.#buffer += this.#decoder.decode(chunk, { stream: true });
    const events: string[] = [];
    let start = 0;
    for (let nl = this.#buffer.indexOf('\n'); nl >= 0; nl = this.#buffer.indexOf('\n', start)) {
      const end = nl > start && this.#buffer.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      this.#line(this.#buffer.slice(start, end), events);
      start = nl + 1;
    }
    this.#buffer = start === 0 ? this.#buffer : this.#buffer.slice(start);
    if (this.#buffer.length > MAX_LINE_CHARS) {
      throw new Error(`upstream SSE line longer than ${MAX_LINE_CHARS} characters`);
    }
    return events;
  }

  #line(line: string, events: string[]): void {
    if (line === '') {
      if (this.#data.length > 0) events.push(this.#data.join('\n'));
      this.#data = [];
      return;
    }
    if (line.startsWith('data:')) {
      this.#data.push(line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5));
    }
  }
}

/** One SSE event carrying JSON (or `[DONE]`). */
export function sseEvent(data: string): string {
  return `data: ${data}\n\n`;
}
