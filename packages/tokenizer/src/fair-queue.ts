interface Entry<T> {
  item: T;
  /** Start tag: the owner's share of work done before this entry may start. */
  start: number;
  /** Arrival order, to break ties between equal start tags. */
  seq: number;
}

interface Lane<T> {
  entries: Entry<T>[];
  /** Finish tag of the owner's last entry: its next entry starts no earlier. */
  finish: number;
}

/**
 * Work queued by owner (a tenant) and taken in start-time fair order (Goyal, Vin and Cheng's
 * SFQ): an entry's start tag is the later of the virtual time (the start tag of the entry taken
 * last) and its owner's previous finish tag; its finish tag adds its cost. The entry with the
 * smallest start tag goes next. So an owner with a backlog has tags far ahead, and an owner
 * that arrives with one job starts at the virtual time: it goes next, right after the work
 * already taken, whatever the backlog. Between owners that both keep work queued, each gets
 * the same cost served, however its work is cut into entries.
 */
export class FairQueue<T> {
  readonly #lanes = new Map<string, Lane<T>>();
  #virtual = 0;
  #seq = 0;
  #size = 0;

  /** Entries waiting, over every owner. */
  get size(): number {
    return this.#size;
  }

  push(owner: string, cost: number, item: T): void {
    let lane = this.#lanes.get(owner);
    if (!lane) this.#lanes.set(owner, (lane = { entries: [], finish: 0 }));
    const start = Math.max(this.#virtual, lane.finish);
    lane.finish = start + cost;
    lane.entries.push({ item, start, seq: this.#seq++ });
    this.#size += 1;
  }

  /**
   * Puts an entry taken by `shift` back at the head of its owner's lane, with its start tag
   * (a count that has to run again another way keeps its place).
   */
  unshift(owner: string, taken: Taken<T>): void {
    let lane = this.#lanes.get(owner);
    if (!lane) this.#lanes.set(owner, (lane = { entries: [], finish: taken.start }));
    lane.entries.unshift({ item: taken.item, start: taken.start, seq: -1 });
    this.#size += 1;
  }

  /**
   * Takes the entry with the smallest start tag among the owners `may` allows (all by default),
   * or undefined when none waits.
   */
  shift(may?: (owner: string) => boolean): (Taken<T> & { owner: string }) | undefined {
    let owner: string | undefined;
    let best: Entry<T> | undefined;
    for (const [id, lane] of this.#lanes) {
      const head = lane.entries[0];
      if (!head) {
        // Idle and no longer ahead of the virtual time: nothing left to remember.
        if (lane.finish <= this.#virtual) this.#lanes.delete(id);
        continue;
      }
      if (may && !may(id)) continue;
      if (!best || head.start < best.start || (head.start === best.start && head.seq < best.seq)) {
        best = head;
        owner = id;
      }
    }
    if (!best || owner === undefined) return undefined;
    this.#lanes.get(owner)!.entries.shift();
    this.#size -= 1;
    this.#virtual = Math.max(this.#virtual, best.start);
    return { owner, item: best.item, start: best.start };
  }

  /** Removes a waiting entry (its caller left); false when it is not waiting. */
  remove(owner: string, item: T): boolean {
    const entries = this.#lanes.get(owner)?.entries;
    const index = entries?.findIndex((e) => e.item === item) ?? -1;
    if (!entries || index < 0) return false;
    entries.splice(index, 1);
    this.#size -= 1;
    return true;
  }
}

/** An entry as `shift` hands it out. */
export interface Taken<T> {
  item: T;
  start: number;
}
