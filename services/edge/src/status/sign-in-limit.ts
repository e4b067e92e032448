/**
 * Sign-in attempts per client, in fixed one-minute windows: a guessing client is refused
 * (429) after `perMinute` attempts until its minute ends, whatever it guesses. Memory is
 * bounded: windows are dropped once over, and at most `maxClients` are tracked (past that,
 * every new client counts against one shared window, so a flood of addresses gains nothing).
 */
export class SignInLimit {
  readonly #windows = new Map<string, { start: number; n: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly maxClients = 10_000,
  ) {}

  /** Takes one attempt for `client`; returns the seconds to wait when it has none left. */
  take(client: string, nowMs = Date.now()): number | undefined {
    const minute = Math.floor(nowMs / 60_000) * 60_000;
    if (this.#windows.size >= this.maxClients) {
      for (const [k, w] of this.#windows) if (w.start < minute) this.#windows.delete(k);
    }
    const key = this.#windows.size >= this.maxClients && !this.#windows.has(client) ? '*' : client;
    let w = this.#windows.get(key);
    if (!w || w.start < minute) this.#windows.set(key, (w = { start: minute, n: 0 }));
    if (w.n >= this.perMinute) return Math.max(1, Math.ceil((minute + 60_000 - nowMs) / 1_000));
    w.n += 1;
    return undefined;
  }
}
