/**
 * Turns on the event loop for large request bodies.
 *
 * A body is parsed and validated on the event loop, which every tenant's calls share: a 10 MiB
 * JSON body of many small messages costs 20-50 ms there, and a tenant sending such bodies on
 * many connections (refused once counted, so they cost it nothing) would keep the loop busy and
 * hold up every other tenant's calls for seconds. Bodies up to `inlineBytes` are parsed at
 * once; a larger one waits for its turn:
 *
 * - turns go fairly between tenants, by bytes (start-time fair queueing): a body's turn starts
 *   after the bytes its tenant has had parsed while others waited, so a tenant with a backlog
 *   of large bodies delays another tenant's next body by at most the one being parsed;
 * - turns take at most `share` of the event loop: after a turn that kept the loop d ms (the
 *   parse, the validation and the call's first steps, and whatever else ran before the loop came
 *   round), the next begins d × (1 - share) / share later, so calls already past their parse
 *   go on in between.
 *
 * The wait is the body's only cost until its turn: nothing is parsed for a client that left.
 */
export interface IntakeOptions {
  /** Bodies up to this many bytes are parsed at once. */
  inlineBytes: number;
  /** The share of the event loop (0-1] that turns may take. */
  share: number;
  /** Called with each turn's tenant and how long it waited, seconds. */
  onWaited?: (tenant: string, seconds: number) => void;
  now?: () => number;
}

interface Turn {
  tenant: string;
  bytes: number;
  /** Virtual start: the turn goes before any with a larger one. */
  start: number;
  queuedAt: number;
  gone: () => boolean;
  resolve: (taken: boolean) => void;
}

export class Intake {
  readonly #opts: Required<Omit<IntakeOptions, 'onWaited'>> & Pick<IntakeOptions, 'onWaited'>;
  /** Waiting turns by tenant, in arrival order (so in virtual start order). */
  readonly #queues = new Map<string, Turn[]>();
  /** Each tenant's virtual finish: where its next turn starts, at the earliest. */
  readonly #finish = new Map<string, number>();
  #virtual = 0;
  #waiting = 0;
  #busy = false;
  /** When the next turn may begin (the share's pause after the last). */
  #nextAt = 0;

  constructor(opts: IntakeOptions) {
    if (!(opts.share > 0 && opts.share <= 1)) throw new RangeError('share must be in (0, 1]');
    this.#opts = { now: () => performance.now(), ...opts };
  }

  /** Whether a body of this size waits for a turn. */
  queues(bytes: number): boolean {
    return bytes > this.#opts.inlineBytes;
  }

  /**
   * Resolves when the body may be parsed: true, or false when its client left while it waited
   * (`gone`), so there is nothing to parse.
   */
  turn(tenant: string, bytes: number, gone: () => boolean): Promise<boolean> {
    return new Promise((resolve) => {
      const start = Math.max(this.#virtual, this.#finish.get(tenant) ?? 0);
      this.#finish.set(tenant, start + bytes);
      const turn: Turn = { tenant, bytes, start, queuedAt: this.#opts.now(), gone, resolve };
      let queue = this.#queues.get(tenant);
      if (!queue) this.#queues.set(tenant, (queue = []));
      queue.push(turn);
      this.#waiting++;
      this.#pump();
    });
  }

  /** Turns waiting, by tenant (for the metrics). */
  waiting(): ReadonlyMap<string, number> {
    const out = new Map<string, number>();
    for (const [tenant, queue] of this.#queues) out.set(tenant, queue.length);
    return out;
  }

  #pump(): void {
    if (this.#busy || this.#waiting === 0) return;
    this.#busy = true;
    const delay = this.#nextAt - this.#opts.now();
    if (delay > 0) setTimeout(() => this.#run(), delay);
    else setImmediate(() => this.#run());
  }

  #run(): void {
    let turn = this.#take();
    while (turn && left(turn)) {
      turn.resolve(false);
      turn = this.#take();
    }
    if (!turn) return this.#idle();
    const began = this.#opts.now();
    this.#virtual = turn.start;
    this.#opts.onWaited?.(turn.tenant, (began - turn.queuedAt) / 1000);
    // The body is parsed, validated and its call begun in the microtasks after this returns;
    // the next check phase comes once they and the loop's pending I/O have run.
    turn.resolve(true);
    setImmediate(() => {
      const now = this.#opts.now();
      const share = this.#opts.share;
      this.#nextAt = now + ((now - began) * (1 - share)) / share;
      this.#idle();
    });
  }

  #idle(): void {
    this.#busy = false;
    if (this.#waiting === 0) {
      // Nobody waits: fairness starts afresh (no tenant keeps a debt from a busy spell).
      this.#finish.clear();
      this.#virtual = 0;
    }
    this.#pump();
  }

  /** Removes and returns the waiting turn with the least virtual start (ties: the tenant waiting longest). */
  #take(): Turn | undefined {
    let best: Turn | undefined;
    for (const queue of this.#queues.values()) {
      const head = queue[0]!;
      if (!best || head.start < best.start) best = head;
    }
    if (!best) return undefined;
    const queue = this.#queues.get(best.tenant)!;
    queue.shift();
    if (queue.length === 0) this.#queues.delete(best.tenant);
    this.#waiting--;
    return best;
  }
}

/** Whether a turn's client left; a check that throws counts as left (the turns go on). */
function left(turn: Turn): boolean {
  try {
    return turn.gone();
  } catch {
    return true;
  }
}
