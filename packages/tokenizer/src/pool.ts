import { Worker } from 'node:worker_threads';
import { FairQueue, type Taken } from './fair-queue.js';
import {
  boundJob,
  type CountJob,
  type WorkerCounting,
  type WorkerReply,
  type WorkerRequest,
} from './job.js';

/** A count for the pool: the job, whose it is and what it weighs. */
export interface PoolJob {
  job: CountJob;
  /** Whose count it is (a tenant): each owner has its own queue. */
  owner: string;
  /** Characters it reads (size.ts): what the owner's bound counts. */
  chars: number;
  /** Its cost in o200k characters (job.ts): its share of a worker's time. */
  cost: number;
  /** Aborted while it waits: it leaves the queue and rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** What the pool reports as it goes (the edge turns these into metrics). */
export interface CountObserver {
  /** A count left its owner's queue for a worker after waiting `waitedMs`. */
  started?(owner: string, waitedMs: number): void;
  /** A count ran past the time limit: its worker was stopped, it is counted with the bound. */
  timedOut?(owner: string): void;
}

/** One owner's counts in the pool. */
export interface OwnerCounts {
  /** Counts waiting for a worker. */
  waiting: number;
  /** Counts a worker is running. */
  running: number;
  /** Characters of the counts waiting and running (what `maxPendingChars` bounds). */
  chars: number;
}

/**
 * A count refused because its owner already has `limit` characters of counting waiting or
 * running in the pool (the caller answers it like a cap of calls in flight).
 */
export class CountQueueFull extends Error {
  constructor(
    readonly owner: string,
    /** Characters the owner has waiting or running. */
    readonly pendingChars: number,
    /** Characters of the count refused. */
    readonly chars: number,
    readonly limit: number,
  ) {
    super(
      `${owner} already has ${pendingChars} characters of prompts being counted (limit ${limit}); ` +
        `this one has ${chars}`,
    );
    this.name = 'CountQueueFull';
  }
}

export interface WorkerPoolOptions {
  /** Worker threads, started as counts need them. */
  size: number;
  /** Longest a count may run in a worker before the worker is stopped (and replaced). */
  timeoutMs: number;
  /**
   * Longest a worker may take to start a count (its boot and its tokenizer's load, seconds on
   * a loaded box) before it is stopped as stuck, as a count past `timeoutMs` is. Default 60 s.
   */
  startTimeoutMs?: number | undefined;
  /** Characters one owner may have waiting or running; one count is always taken. */
  maxPendingChars: number;
  observer?: CountObserver | undefined;
  /** Starts a count worker (tests pass their own). */
  spawn?: (() => Worker) | undefined;
}

interface Task extends PoolJob {
  id: number;
  queuedAt: number;
  /** Its start tag in the fair queue, once taken. */
  start: number;
  /** Counted with the bound after the exact count ran out of time. */
  bounded: boolean;
  resolve: (tokens: number) => void;
  reject: (err: unknown) => void;
  detach?: (() => void) | undefined;
}

interface Slot {
  worker: Worker;
  task: Task | undefined;
  timer: NodeJS.Timeout | undefined;
  /** Stopped by the pool or crashed: its events are no longer news. */
  gone: boolean;
}

/** The owner warm-up counts run as (outside every queue). */
const WARM_UP = '(warm-up)';
/** A worker that has not started a count within this is stuck (`startTimeoutMs`). */
const START_LIMIT_MS = 60_000;

/**
 * A fixed-size pool of count workers, spawned on demand, fed from one fair queue: each owner
 * (tenant) has its own queue and the next count is the one with the smallest start tag
 * (fair-queue.ts), so an owner's backlog delays its own counts, not another's. Each worker
 * runs one count at a time (a count posted to a worker could not be overtaken), and an owner
 * runs on at most all workers but one while others may wait. An owner may have at most
 * `maxPendingChars` characters waiting or running (past it, `CountQueueFull`). A count that
 * runs past `timeoutMs` has its worker stopped and is counted again with the `estimate` bound
 * (linear in its size), so no input can hold a worker for longer. The time runs from when the
 * worker starts counting (WorkerCounting): its boot and its tokenizer's load are not the count's.
 * A crashed worker fails only the count it was running and is replaced; the counts still
 * waiting run on its successor.
 */
export class WorkerPool {
  readonly #queue = new FairQueue<Task>();
  readonly #owners = new Map<string, OwnerCounts>();
  readonly #slots: Slot[] = [];
  readonly #maxRunning: number;
  #nextId = 1;
  #closed = false;

  constructor(private readonly opts: WorkerPoolOptions) {
    this.#maxRunning = Math.max(1, opts.size - 1);
  }

  run(job: PoolJob): Promise<number> {
    if (this.#closed) return Promise.reject(new Error('token counter is closed'));
    if (job.signal?.aborted) return Promise.reject(abortReason(job.signal));
    const pending = this.#owners.get(job.owner)?.chars ?? 0;
    if (pending > 0 && pending + job.chars > this.opts.maxPendingChars) {
      return Promise.reject(
        new CountQueueFull(job.owner, pending, job.chars, this.opts.maxPendingChars),
      );
    }
    return new Promise<number>((resolve, reject) => {
      const task: Task = {
        ...job,
        id: this.#nextId++,
        queuedAt: performance.now(),
        start: 0,
        bounded: false,
        resolve,
        reject,
      };
      const owner = this.#owner(job.owner);
      owner.chars += task.chars;
      owner.waiting += 1;
      this.#queue.push(job.owner, job.cost, task);
      const { signal } = job;
      if (signal) {
        const onAbort = () => this.#abandon(task);
        signal.addEventListener('abort', onAbort, { once: true });
        task.detach = () => signal.removeEventListener('abort', onAbort);
      }
      this.#dispatch();
    });
  }

  /** Starts every worker and has each run `job` once (to load encodings ahead of traffic). */
  async warm(job: CountJob): Promise<void> {
    while (!this.#closed && this.#slots.length < this.opts.size) this.#spawn();
    const idle = this.#slots.filter((slot) => !slot.task);
    await Promise.all(
      idle.map(
        (slot) =>
          new Promise<number>((resolve, reject) => {
            const task: Task = {
              job,
              owner: WARM_UP,
              chars: 0,
              cost: 0,
              id: this.#nextId++,
              queuedAt: performance.now(),
              start: 0,
              bounded: true,
              resolve,
              reject,
            };
            this.#owner(WARM_UP).waiting += 1;
            this.#startOn(slot, task);
          }),
      ),
    );
  }

  async close(): Promise<void> {
    this.#closed = true;
    const closed = new Error('token counter is closed');
    for (let taken = this.#queue.shift(); taken; taken = this.#queue.shift()) {
      taken.item.detach?.();
      taken.item.reject(closed);
    }
    const slots = this.#slots.splice(0);
    for (const slot of slots) {
      const task = this.#retire(slot);
      task?.reject(closed);
    }
    this.#owners.clear();
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  get workers(): number {
    return this.#slots.length;
  }

  /** Each owner's counts in the pool (owners with none are not listed). */
  owners(): ReadonlyMap<string, Readonly<OwnerCounts>> {
    return this.#owners;
  }

  #owner(id: string): OwnerCounts {
    let owner = this.#owners.get(id);
    if (!owner) this.#owners.set(id, (owner = { waiting: 0, running: 0, chars: 0 }));
    return owner;
  }

  /** Forgets an owner with nothing left in the pool. */
  #tidy(id: string, owner: OwnerCounts): void {
    if (owner.waiting === 0 && owner.running === 0) this.#owners.delete(id);
  }

  /** Starts waiting counts while a worker is idle (or one more may be spawned). */
  #dispatch(): void {
    const mayStart = (id: string) => (this.#owners.get(id)?.running ?? 0) < this.#maxRunning;
    for (;;) {
      const idle = this.#slots.find((slot) => !slot.task);
      if (!idle && this.#slots.length >= this.opts.size) return;
      const taken = this.#queue.shift(mayStart);
      if (!taken) return;
      this.#startOn(idle ?? this.#spawn(), taken.item, taken);
    }
  }

  #startOn(slot: Slot, task: Task, taken?: Taken<Task>): void {
    if (taken) task.start = taken.start;
    task.detach?.();
    const owner = this.#owner(task.owner);
    owner.waiting -= 1;
    owner.running += 1;
    slot.task = task;
    if (task.owner !== WARM_UP) {
      this.opts.observer?.started?.(task.owner, performance.now() - task.queuedAt);
    }
    slot.worker.ref();
    // Until the worker says it is counting (WorkerCounting), the limit is its start's.
    slot.timer = setTimeout(() => this.#timedOut(slot), this.opts.startTimeoutMs ?? START_LIMIT_MS);
    try {
      slot.worker.postMessage({ id: task.id, job: task.job } satisfies WorkerRequest);
    } catch (err) {
      // Not cloneable (a caller passed something other than plain JSON).
      this.#idle(slot);
      this.#settle(task, () => task.reject(err));
    }
  }

  /** The slot's count is over: the worker waits for the next one. */
  #idle(slot: Slot): void {
    clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.task = undefined;
    slot.worker.unref();
  }

  #settle(task: Task, answer: () => void): void {
    const owner = this.#owner(task.owner);
    owner.running -= 1;
    owner.chars -= task.chars;
    this.#tidy(task.owner, owner);
    answer();
  }

  /** A waiting count whose caller left: out of the queue, rejected with the signal's reason. */
  #abandon(task: Task): void {
    if (!this.#queue.remove(task.owner, task)) return;
    const owner = this.#owner(task.owner);
    owner.waiting -= 1;
    owner.chars -= task.chars;
    this.#tidy(task.owner, owner);
    if (task.signal) task.reject(abortReason(task.signal));
  }

  /**
   * The count ran out of time: its worker is stopped (nothing else interrupts a synchronous
   * count) and the count goes back to the head of its owner's queue, to be counted with the
   * bound. A bound that runs out of time too fails.
   */
  #timedOut(slot: Slot): void {
    const task = this.#retire(slot);
    this.#dispatchAfter(() => {
      if (!task) return;
      if (task.bounded) {
        const message = `token count did not finish within ${this.opts.timeoutMs} ms (or its worker did not start it)`;
        this.#settle(task, () => task.reject(new Error(message)));
        return;
      }
      this.opts.observer?.timedOut?.(task.owner);
      const owner = this.#owner(task.owner);
      owner.running -= 1;
      owner.waiting += 1;
      task.bounded = true;
      task.job = boundJob(task.job);
      task.queuedAt = performance.now();
      this.#queue.unshift(task.owner, { item: task, start: task.start });
    });
  }

  /** A worker that crashed or exited: its own count fails, the others wait for a successor. */
  #lost(slot: Slot, err: Error): void {
    if (slot.gone) return;
    const task = this.#retire(slot);
    this.#dispatchAfter(() => {
      if (task) this.#settle(task, () => task.reject(err));
    });
  }

  #dispatchAfter(change: () => void): void {
    change();
    if (!this.#closed) this.#dispatch();
  }

  /** Takes the slot out of the pool and stops its worker; returns the count it was running. */
  #retire(slot: Slot): Task | undefined {
    const task = slot.task;
    slot.gone = true;
    clearTimeout(slot.timer);
    slot.task = undefined;
    const index = this.#slots.indexOf(slot);
    if (index >= 0) this.#slots.splice(index, 1);
    void slot.worker.terminate();
    return task;
  }

  #spawn(): Slot {
    const worker = (this.opts.spawn ?? createWorker)();
    worker.unref();
    const slot: Slot = { worker, task: undefined, timer: undefined, gone: false };
    worker.on('message', (reply: WorkerReply | WorkerCounting) => {
      const task = slot.task;
      if (slot.gone || !task || task.id !== reply.id) return;
      if ('counting' in reply) {
        clearTimeout(slot.timer);
        slot.timer = setTimeout(() => this.#timedOut(slot), this.opts.timeoutMs);
        return;
      }
      this.#idle(slot);
      this.#dispatchAfter(() =>
        this.#settle(task, () =>
          reply.ok
            ? task.resolve(reply.tokens)
            : task.reject(new Error(`token count failed: ${reply.message}`)),
        ),
      );
    });
    worker.on('error', (err) => this.#lost(slot, err));
    worker.on('exit', (code) =>
      this.#lost(slot, new Error(`count worker exited with code ${code}`)),
    );
    this.#slots.push(slot);
    return slot;
  }
}

/** Why the caller aborted, as an Error (what AbortSignal.abort() gives, or what it was given). */
function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(String(reason));
}

function createWorker(): Worker {
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./count-worker.js', import.meta.url));
  // Running from the TypeScript sources (vitest, `node --import tsx`): register tsx in the
  // worker before loading its entry (an `--import tsx` execArgv does not reach workers on Node 20).
  const entry = JSON.stringify(new URL('./count-worker.ts', import.meta.url).href);
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${entry}); })`;
  return new Worker(boot, { eval: true });
}
