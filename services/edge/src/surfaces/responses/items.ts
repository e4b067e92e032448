/** An output item of a response (message, function_call, reasoning, ...), as read. */
export interface Item {
  type?: string;
  id?: string;
  status?: string;
  name?: string;
  arguments?: string;
  input?: string;
  content?: Part[];
  summary?: { type?: string; text?: string }[];
  [field: string]: unknown;
}

interface Part {
  type?: string;
  text?: string;
  refusal?: string;
  [field: string]: unknown;
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');
const num = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);
const isPart = (v: unknown): v is Part => typeof v === 'object' && v !== null && !Array.isArray(v);
/**
 * An item's parts as a list of objects, whatever the upstream sent in their place (a string, an
 * object, nulls in the list): an upstream out of its form must not make the response
 * unreadable, so that its usage is lost and the client answered 502.
 */
const parts = (v: unknown): Part[] => (Array.isArray(v) ? v.filter(isPart) : []);

/** The text the model wrote in an item: what its tokens were spent on. */
export function itemText(item: Item): string {
  const content = parts(item.content)
    .map((p) => str(p.text) + str(p.refusal))
    .join('');
  const summary = parts(item.summary)
    .map((s) => str(s.text))
    .join('');
  return content + summary + str(item.arguments) + str(item.input);
}

/**
 * The output items of a streamed response, built from `output_item.added`, the deltas and
 * `output_item.done` (which replaces what the deltas built), for a non-streaming client and for
 * the terminal event of a stream the edge cut.
 */
export class OutputItems {
  readonly #items = new Map<number, { item: Item; done: boolean }>();

  /** Records an item; true the first time its index is seen. */
  put(index: number, item: Item): boolean {
    const first = !this.#items.has(index);
    const done = item.status !== undefined && item.status !== 'in_progress';
    this.#items.set(index, { item: structuredClone(item), done });
    return first;
  }

  /** Applies a text delta to the item it belongs to. */
  delta(type: string, data: Record<string, unknown>): void {
    const index = num(data.output_index);
    let entry = this.#items.get(index);
    if (!entry) this.#items.set(index, (entry = { item: { id: str(data.item_id) }, done: false }));
    const { item } = entry;
    const delta = str(data.delta);
    // The part at `index`, made from `init` when there is none: an index past the end adds one
    // at the end (a list never holes: 1e9 would make every later pass over it 1e9 steps).
    const at = (field: 'content' | 'summary', index: unknown, init: Part): Part => {
      const held: unknown = item[field];
      const list: unknown[] = Array.isArray(held) ? held : (item[field] = []);
      const i = Math.min(num(index), list.length);
      const part = list[i];
      if (isPart(part)) return part;
      list[i] = init;
      return init;
    };
    switch (type) {
      case 'response.output_text.delta': {
        item.type ??= 'message';
        const part = at('content', data.content_index, outputText());
        part.text = str(part.text) + delta;
        break;
      }
      case 'response.refusal.delta': {
        const part = at('content', data.content_index, { type: 'refusal' });
        part.refusal = str(part.refusal) + delta;
        break;
      }
      case 'response.reasoning_text.delta': {
        const part = at('content', data.content_index, { type: 'reasoning_text', text: '' });
        part.text = str(part.text) + delta;
        break;
      }
      case 'response.reasoning_summary_text.delta': {
        const part = at('summary', data.summary_index, { type: 'summary_text', text: '' });
        part.text = str(part.text) + delta;
        break;
      }
      case 'response.function_call_arguments.delta':
        item.arguments = str(item.arguments) + delta;
        break;
      case 'response.custom_tool_call_input.delta':
        item.input = str(item.input) + delta;
        break;
    }
  }

  /** The items in order; unfinished ones marked incomplete when the response was cut. */
  list(incomplete: boolean): Item[] {
    return [...this.#items.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, { item, done }]) =>
        done || !incomplete ? item : { ...item, status: 'incomplete' },
      );
  }
}

function outputText(): Part {
  return { type: 'output_text', text: '', annotations: [], logprobs: [] };
}
