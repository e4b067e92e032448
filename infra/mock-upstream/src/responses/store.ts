import type { PromptMessage } from '@holdfast/tokenizer';

/**
 * One thing the model reads back: a chat message, or a reasoning item, which carries `hidden`
 * tokens of reasoning (sealed in its encrypted content, or kept with a stored response) and
 * `text` it shows (its summary and reasoning text). Whether a reasoning item is billed depends on
 * where it stands (input.ts).
 */
export type ContextEntry =
  { message: PromptMessage } | { reasoning: { hidden: number; text: string } };

/** A response kept for `previous_response_id`, `GET /v1/responses/:id` and its items' ids. */
export interface StoredResponse {
  /** The response object as it was returned. */
  response: Record<string, unknown>;
  /**
   * The conversation up to and including this response's output: what a later call that
   * names it as `previous_response_id` reads. Instructions are not part of it: OpenAI does not
   * carry them over to the next response.
   */
  conversation: ContextEntry[];
  /** Its output items by id: what an input item that names one (`item_reference`, a reasoning item by id) reads. */
  items: ReadonlyMap<string, ContextEntry[]>;
  /**
   * The reasoning item each output item followed (item id -> reasoning item id): a reasoning
   * model's function call or message sent back by id, store on, needs it sent along (input.ts).
   */
  follows?: ReadonlyMap<string, string>;
}

// Like OpenAI's store, bounded: the oldest responses go first.
const MAX_STORED = 10_000;

/** The responses the mock keeps in memory (calls with `store: true`, the default). */
export class ResponseStore {
  private readonly byId = new Map<string, StoredResponse>();
  /** Output item id -> the id of the response it belongs to. */
  private readonly itemOwner = new Map<string, string>();

  get(id: string): StoredResponse | undefined {
    return this.byId.get(id);
  }

  /** A stored response's output item, by its id. */
  item(id: string): ContextEntry[] | undefined {
    const owner = this.itemOwner.get(id);
    return owner === undefined ? undefined : this.byId.get(owner)?.items.get(id);
  }

  /** The reasoning item a stored output item followed, by the item's id. */
  reasoningBefore(id: string): string | undefined {
    const owner = this.itemOwner.get(id);
    return owner === undefined ? undefined : this.byId.get(owner)?.follows?.get(id);
  }

  put(id: string, stored: StoredResponse): void {
    this.byId.set(id, stored);
    for (const item of stored.items.keys()) this.itemOwner.set(item, id);
    if (this.byId.size > MAX_STORED) {
      const oldest = this.byId.keys().next();
      if (!oldest.done) this.delete(oldest.value);
    }
  }

  delete(id: string): boolean {
    const stored = this.byId.get(id);
    if (!stored) return false;
    for (const item of stored.items.keys()) this.itemOwner.delete(item);
    return this.byId.delete(id);
  }

  clear(): void {
    this.byId.clear();
    this.itemOwner.clear();
  }
}
