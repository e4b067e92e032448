import type { PromptMessage } from '@holdfast/tokenizer';

/** A response kept for `previous_response_id` and `GET /v1/responses/:id`. */
export interface StoredResponse {
  /** The response object as it was returned. */
  response: Record<string, unknown>;
  /**
   * The conversation up to and including this response's output, as chat messages: what a
   * later call that names it as `previous_response_id` is billed for as input. Instructions
   * are not part of it: OpenAI does not carry them over to the next response.
   */
  conversation: PromptMessage[];
}

// Like OpenAI's store, bounded: the oldest responses go first.
const MAX_STORED = 10_000;

/** The responses the mock keeps in memory (calls with `store: true`, the default). */
export class ResponseStore {
  private readonly byId = new Map<string, StoredResponse>();

  get(id: string): StoredResponse | undefined {
    return this.byId.get(id);
  }

  put(id: string, stored: StoredResponse): void {
    this.byId.set(id, stored);
    if (this.byId.size > MAX_STORED) {
      const oldest = this.byId.keys().next();
      if (!oldest.done) this.byId.delete(oldest.value);
    }
  }

  delete(id: string): boolean {
    return this.byId.delete(id);
  }

  clear(): void {
    this.byId.clear();
  }
}
