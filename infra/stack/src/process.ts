import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { BaseError } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit/infra';

/** Where a process's output goes: one call per line. */
export type LineSink = (name: string, line: string) => void;

export interface ProcessSpec {
  /** Short name, the prefix of its log lines. */
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Up when this answers true (our services: their /readyz; infra: its port or /ping). */
  ready: { probe: () => Promise<boolean> };
  readyTimeoutMs: number;
  /** How to ask it to stop (default SIGTERM; nats-server exits 0 only on SIGINT). */
  stopSignal?: NodeJS.Signals;
  /** After that signal, how long before SIGKILL. */
  stopTimeoutMs: number;
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** A process did not come up; the message says which and why. */
export class StartError extends BaseError<'start_failed'> {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super({ code: 'start_failed', message, cause: opts.cause });
  }
}

/**
 * One child process of the stack. It runs in its own process group (`detached`), so a
 * Ctrl-C in the terminal reaches only the runner, which then stops the children one by one
 * in reverse start order (a service drains NATS before nats-server goes away).
 */
export class ManagedProcess {
  readonly exited: Promise<Exit>;
  #exit: Exit | undefined;
  readonly #child: ChildProcess;
  readonly #spawned: Promise<void>;

  constructor(
    readonly spec: ProcessSpec,
    sink: LineSink,
  ) {
    const child = spawn(spec.command, spec.args, {
      env: spec.env ?? process.env,
      cwd: spec.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    this.#child = child;
    let onExit: (exit: Exit) => void = () => undefined;
    this.exited = new Promise((resolve) => (onExit = resolve));
    const ended = (exit: Exit) => {
      this.#exit ??= exit;
      onExit(this.#exit);
    };
    child.once('exit', (code, signal) => ended({ code, signal }));
    this.#spawned = new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (err) => {
        // A binary that cannot be started emits 'error' and never 'exit'.
        ended({ code: -1, signal: null });
        reject(new StartError(`${spec.name}: ${err.message}`));
      });
    });
    // Awaited by ready(); this branch only keeps an early failure from being "unhandled".
    this.#spawned.catch(() => undefined);
    const onLine = (line: string) => sink(spec.name, line);
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
  }

  get name(): string {
    return this.spec.name;
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  get running(): boolean {
    return this.#exit === undefined;
  }

  /** Resolves once the process is ready; throws (after stopping it) when it is not. */
  async ready(): Promise<void> {
    const { spec } = this;
    await this.#spawned;
    const probe = spec.ready.probe;
    try {
      // Polls until ready, or until the process is gone (then there is nothing to wait for).
      await waitFor(async () => !this.running || (await probe()), {
        timeoutMs: spec.readyTimeoutMs,
        intervalMs: 50,
        what: `${spec.name} to be ready`,
      });
    } catch (err) {
      await this.stop();
      throw new StartError((err as Error).message);
    }
    if (!this.running) {
      const { code, signal } = await this.exited;
      throw new StartError(`${spec.name} exited (${signal ?? code}) before it was ready`);
    }
  }

  /** The stop signal, then SIGKILL after the spec's timeout; resolves when the process is gone. */
  async stop(): Promise<Exit> {
    if (this.running) {
      this.#signal(this.spec.stopSignal ?? 'SIGTERM');
      const timer = setTimeout(() => this.#signal('SIGKILL'), this.spec.stopTimeoutMs);
      await this.exited;
      clearTimeout(timer);
    }
    return this.exited;
  }

  /** Last resort when the runner itself goes away: kill the whole process group now. */
  kill(): void {
    if (this.running) this.#signal('SIGKILL');
  }

  #signal(signal: NodeJS.Signals): void {
    try {
      // The negative pid is the child's process group: helpers it started go too.
      process.kill(-this.pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/**
 * The stack's processes in start order. `stop()` (Ctrl-C, SIGTERM, a failed start) stops
 * them in reverse order, including one still starting; nothing starts after it was called.
 */
export class ProcessGroup {
  readonly #procs: ManagedProcess[] = [];
  #stopping: Promise<Array<{ name: string; exit: Exit }>> | undefined;

  constructor(private readonly sink: LineSink) {}

  get processes(): readonly ManagedProcess[] {
    return this.#procs;
  }

  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** Spawns a process, counts it in the group at once, and waits until it is ready. */
  async start(spec: ProcessSpec): Promise<ManagedProcess> {
    if (this.stopping) throw new StartError(`stopping: ${spec.name} not started`);
    const proc = new ManagedProcess(spec, this.sink);
    this.#procs.push(proc);
    await proc.ready();
    return proc;
  }

  /** Resolves with the first process that ends while the group is not stopping. */
  firstExit(): Promise<{ name: string; exit: Exit }> {
    return Promise.race(this.#procs.map((p) => p.exited.then((exit) => ({ name: p.name, exit }))));
  }

  /** Stops every process, last started first; the same promise for every caller. */
  stop(): Promise<Array<{ name: string; exit: Exit }>> {
    this.#stopping ??= (async () => {
      const exits: Array<{ name: string; exit: Exit }> = [];
      for (const proc of [...this.#procs].reverse()) {
        exits.push({ name: proc.name, exit: await proc.stop() });
      }
      return exits;
    })();
    return this.#stopping;
  }

  kill(): void {
    for (const proc of this.#procs) proc.kill();
  }
}
