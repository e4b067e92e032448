import type { Writable } from 'node:stream';

/**
 * What the edge lets through of one read of the upstream, written to the client as one chunk.
 * A read often carries several events (a fast upstream, a burst after a pause), and every write
 * to the client's response is a socket write of its own: 13% of a streamed call's CPU in the
 * edge's profile (issue 14). The bytes and their order are unchanged, and nothing waits for a
 * timer: the pump flushes at the end of each read and before it holds the stream, and the
 * relay's own closing events go through the same batch, after what came before them.
 */
export class WriteBatch {
  #pending = '';

  constructor(private readonly out: Writable) {}

  write(text: string): void {
    this.#pending += text;
  }

  /** Writes what is pending, as one chunk. */
  flush(): void {
    if (this.#pending === '') return;
    const text = this.#pending;
    this.#pending = '';
    this.out.write(text);
  }

  /** Writes what is pending, then ends the stream. */
  end(): void {
    this.flush();
    this.out.end();
  }
}
