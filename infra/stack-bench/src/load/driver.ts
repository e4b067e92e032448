import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RunReply, type Load, type LoadResult, type Target } from './protocol.js';

const CHILD = fileURLToPath(new URL('./child.js', import.meta.url));

/** The parent's side of the load generator process. */
export class LoadGenerator {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, (r: RunReply) => void>();
  #next = 0;
  readonly ready: Promise<void>;

  constructor() {
    this.#child = fork(CHILD, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let onReady: () => void = () => undefined;
    let onFail: (err: Error) => void = () => undefined;
    this.ready = new Promise((resolve, reject) => ((onReady = resolve), (onFail = reject)));
    // Awaited by the caller; this only keeps an early exit from being "unhandled".
    this.ready.catch(() => undefined);
    this.#child.on('message', (raw: unknown) => {
      const msg = RunReply.parse(raw);
      if (msg.kind === 'ready') onReady();
      else this.#waiting.get(msg.id)?.(msg);
    });
    this.#child.once('exit', (code, signal) => {
      const err = new Error(`load generator exited (${signal ?? code})`);
      onFail(err);
      for (const [id, done] of this.#waiting) done({ kind: 'failed', id, message: err.message });
    });
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  async run(target: Target, load: Load, seconds: number): Promise<LoadResult> {
    const id = this.#next++;
    const reply = await new Promise<RunReply>((resolve) => {
      this.#waiting.set(id, resolve);
      this.#child.send({ id, target, load, seconds });
    });
    this.#waiting.delete(id);
    if (reply.kind !== 'result')
      throw new Error(reply.kind === 'failed' ? reply.message : 'bad reply');
    return reply.result;
  }

  /** Disconnecting lets the child close its pools and exit. */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise((r) => this.#child.once('exit', r));
    this.#child.disconnect();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}
