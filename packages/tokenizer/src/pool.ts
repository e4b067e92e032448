import { Worker } from 'node:worker_threads';
import type { CountJob, WorkerReply, WorkerRequest } from './job.js';

interface Pending {
  resolve: (tokens: number) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
}

/**
 * A fixed-size pool of count workers, spawned on demand. A job goes to the least busy worker.
 * A worker holds the process open only while it has jobs. A crashed worker fails its own
 * jobs and is replaced on the next job.
 */
export class WorkerPool {
  private readonly slots: Slot[] = [];
  private nextId = 1;
  private closed = false;

  constructor(private readonly size: number) {}

  run(job: CountJob): Promise<number> {
    if (this.closed) return Promise.reject(new Error('token counter is closed'));
    return this.runOn(this.pick(), job);
  }

  /** Starts every worker and has each run `job` once (to load encodings ahead of traffic). */
  async warm(job: CountJob): Promise<void> {
    while (!this.closed && this.slots.length < this.size) this.spawn();
    await Promise.all(this.slots.map((slot) => this.runOn(slot, job)));
  }

  async close(): Promise<void> {
    this.closed = true;
    const slots = this.slots.splice(0);
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
    for (const slot of slots) this.failAll(slot, new Error('token counter is closed'));
  }

  get workers(): number {
    return this.slots.length;
  }

  private runOn(slot: Slot, job: CountJob): Promise<number> {
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      slot.pending.set(id, { resolve, reject });
      if (slot.pending.size === 1) slot.worker.ref();
      try {
        slot.worker.postMessage({ id, job } satisfies WorkerRequest);
      } catch (err) {
        // Not cloneable (a caller passed something other than plain JSON).
        this.settle(slot, id);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  private pick(): Slot {
    let best: Slot | undefined;
    for (const slot of this.slots) {
      if (!best || slot.pending.size < best.pending.size) best = slot;
    }
    if (!best || (best.pending.size > 0 && this.slots.length < this.size)) return this.spawn();
    return best;
  }

  private spawn(): Slot {
    const worker = createWorker();
    worker.unref();
    const slot: Slot = { worker, pending: new Map() };
    worker.on('message', (reply: WorkerReply) => {
      const pending = this.settle(slot, reply.id);
      if (reply.ok) pending?.resolve(reply.tokens);
      else pending?.reject(new Error(`token count failed: ${reply.message}`));
    });
    worker.on('error', (err) => this.drop(slot, err));
    worker.on('exit', (code) =>
      this.drop(slot, new Error(`count worker exited with code ${code}`)),
    );
    this.slots.push(slot);
    return slot;
  }

  private settle(slot: Slot, id: number): Pending | undefined {
    const pending = slot.pending.get(id);
    slot.pending.delete(id);
    if (slot.pending.size === 0) slot.worker.unref();
    return pending;
  }

  private drop(slot: Slot, err: Error): void {
    const index = this.slots.indexOf(slot);
    if (index >= 0) this.slots.splice(index, 1);
    this.failAll(slot, err);
  }

  private failAll(slot: Slot, err: Error): void {
    for (const pending of slot.pending.values()) pending.reject(err);
    slot.pending.clear();
  }
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
