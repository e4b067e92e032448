/**
 * Runs tasks one after another per key, and tasks of different keys concurrently. The events
 * of one org (every window of a tenant tree) are handled in stream order within a replica.
 *
 * A task of a key with nothing running runs at once, in the caller's turn; one that returns
 * no promise (an event that changes nothing, decided from the state mirror) leaves the key
 * idle and costs no promise at all (issue 14: most events). Its throw is the caller's.
 */
export class KeyedSerial {
  readonly #tails = new Map<string, Promise<void>>();

  run<T>(key: string, task: () => Promise<T> | undefined): Promise<T | undefined> | undefined {
    const previous = this.#tails.get(key);
    const result = previous ? previous.then(task) : task();
    if (!result) return undefined;
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}
