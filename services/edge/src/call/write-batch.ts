import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';

/**
 * What the edge lets through of one read of the upstream, written to the client as one chunk.
 * A read often carries several events (a fast upstream, a burst after a pause), and every write
 * to the client's response is a socket write of its own: 13% of a streamed call's CPU in the
 * edge's profile (issue 14). The bytes and their order are unchanged, and nothing waits for a
 * timer: the pump flushes at the end of each read and before it holds the stream, and the
 * relay's own closing events go through the same batch, after what came before them.
 *
 * `socket` (the response's connection, asked at each write: a pipelined response has none
 * until its turn) is corked from a batch's write until the end of that turn of the event loop
 * (setImmediate), so the response's head, the batch and, when the upstream's end came in the
 * same read, the closing events and the body's last chunk leave in one system call instead of
 * three: the pipe and node's http write each of them on a later tick of the same turn. Only the
 * grouping of the writes changes, and nothing waits past the turn it was written in.
 */
export class WriteBatch {
  #pending = '';
  #corked = false;

  constructor(
    private readonly out: Writable,
    private readonly socket: () => Socket | null | undefined = () => undefined,
  ) {}

  write(text: string): void {
    this.#pending += text;
  }

  /** Writes what is pending, as one chunk. */
  flush(): void {
    if (this.#pending === '') return;
    const text = this.#pending;
    this.#pending = '';
    this.#corkTurn();
    this.out.write(text);
  }

  /** Writes what is pending, then ends the stream. */
  end(): void {
    this.flush();
    this.out.end();
  }

  /** Corks the socket until this turn of the event loop ends (once a turn). */
  #corkTurn(): void {
    if (this.#corked) return;
    const socket = this.socket();
    if (!socket) return;
    this.#corked = true;
    socket.cork();
    setImmediate(() => {
      this.#corked = false;
      // The socket corked, whatever the response's is by now: the two calls always pair.
      socket.uncork();
    });
  }
}
