/** The input tokens a provider-run tool reads per use by default (a page of search results). */
export const SERVER_TOOL_INPUT_TOKENS = 5_000;

/**
 * Responses tools the client runs itself (computer use and the local shell: the client acts and
 * sends back what it saw, as input the request shows); any other type runs at the provider.
 */
const CLIENT_TOOLS = new Set(['function', 'custom', 'computer_use_preview', 'local_shell']);

/** Anthropic's server tools (the client runs the others: custom, bash, text editor, ...). */
const ANTHROPIC_SERVER_TOOL = /^(web_search|web_fetch|code_execution)_/;

/** Uses of provider-run tools billed per use, by kind (web_search, file_search, ...). */
export type ToolUses = Record<string, number>;

const RESPONSES_FEE_TOOL: readonly [RegExp, string][] = [
  [/^web_search/, 'web_search'],
  [/^file_search/, 'file_search'],
  [/^code_interpreter/, 'code_interpreter'],
  [/^image_generation/, 'image_generation'],
];
const ANTHROPIC_FEE_TOOL: readonly [RegExp, string][] = [
  [/^web_search_/, 'web_search'],
  [/^web_fetch_/, 'web_fetch'],
];

const kindOf = (table: readonly [RegExp, string][], type: unknown) =>
  typeof type === 'string' ? table.find(([re]) => re.test(type))?.[1] : undefined;

const bound = (v: unknown) => (typeof v === 'number' && v >= 0 ? v : Infinity);

/**
 * What a provider-run tool adds to the input a call is billed: the search results, fetched
 * pages or tool output the model reads before it answers, which no count of the request can
 * see (the counting endpoints do not include it). Billed as the provider bills it, per use:
 * `perUse` tokens (the plan's `toolInputTokens`, a page of results) for each use the call makes
 * of a tool it counts uses of (web search, web fetch, file search, code interpreter); a tool
 * whose uses it does not count (Anthropic's code execution, an MCP server, any other) reads
 * `perUse` once, and so does each agent skill a Messages `container` loads (its description in
 * the prompt, its files read when used).
 */
export function responsesToolInput(
  tools: readonly { type: string }[] | null | undefined,
  uses: ToolUses,
  perUse: number,
): number {
  const flat = (tools ?? []).filter(
    (t) => !CLIENT_TOOLS.has(t.type) && !kindOf(RESPONSES_FEE_TOOL, t.type),
  ).length;
  return perUse * (flat + totalUses(uses));
}

export function messagesToolInput(
  body: { tools?: readonly object[] },
  uses: ToolUses,
  perUse: number,
): number {
  const { mcp_servers: servers, container } = body as {
    mcp_servers?: unknown;
    container?: { skills?: unknown } | null;
  };
  const skills = Array.isArray(container?.skills) ? container.skills.length : 0;
  const tools = (body.tools ?? []) as readonly { type?: unknown }[];
  const flat = tools.filter(
    (t) =>
      typeof t.type === 'string' &&
      ANTHROPIC_SERVER_TOOL.test(t.type) &&
      !kindOf(ANTHROPIC_FEE_TOOL, t.type),
  ).length;
  const mcp = Array.isArray(servers) ? servers.length : 0;
  return perUse * (flat + mcp + skills + totalUses(uses));
}

const totalUses = (uses: ToolUses) => Object.values(uses).reduce((a, b) => a + b, 0);

/**
 * The uses a Messages call makes of its server tools billed per use (`web_search_*`,
 * `web_fetch_*`): `uses` of each, at most its `max_uses` as Anthropic stops there (unless
 * `ignoreBound`: a broken upstream).
 */
export function messagesToolUses(
  body: { tools?: readonly object[] },
  plan: { toolUses: number; ignoreToolBound: boolean },
): ToolUses {
  const out: ToolUses = {};
  for (const t of (body.tools ?? []) as readonly { type?: unknown; max_uses?: unknown }[]) {
    const kind = kindOf(ANTHROPIC_FEE_TOOL, t.type);
    if (!kind) continue;
    const n = plan.ignoreToolBound ? plan.toolUses : Math.min(plan.toolUses, bound(t.max_uses));
    out[kind] = (out[kind] ?? 0) + n;
  }
  return out;
}

/**
 * The uses a Responses call makes of its tools billed per use (`web_search*`, `file_search`,
 * `code_interpreter`, `image_generation`: one image a use): `uses` of each in order, all of
 * them together at most `max_tool_calls` (unless `ignoreBound`). A stored prompt (`prompt.id`
 * starting `pmpt_`) carries the tools `storedPromptTools` names, used after the request's own.
 */
export function responsesToolUses(
  body: {
    tools?: readonly { type: string }[] | null;
    max_tool_calls?: unknown;
    prompt?: unknown;
  },
  plan: { toolUses: number; ignoreToolBound: boolean; storedPromptTools: readonly string[] },
): ToolUses {
  const out: ToolUses = {};
  let left = plan.ignoreToolBound ? Infinity : bound(body.max_tool_calls);
  const id = (body.prompt as { id?: unknown } | null | undefined)?.id;
  const stored = typeof id === 'string' && id.startsWith('pmpt_') ? plan.storedPromptTools : [];
  for (const t of [...(body.tools ?? []), ...stored.map((type) => ({ type }))]) {
    const kind = kindOf(RESPONSES_FEE_TOOL, t.type);
    if (!kind) continue;
    const n = Math.min(plan.toolUses, left);
    left -= n;
    if (n > 0 || !(kind in out)) out[kind] = (out[kind] ?? 0) + n;
  }
  return out;
}

/** A 1x1 PNG, base64: the image an `image_generation_call` item carries. */
const MOCK_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** The Responses output items of those uses, one per use: `web_search_call`, ... */
export function toolCallItems(id: string, uses: ToolUses): object[] {
  const items: object[] = [];
  for (const [kind, n] of Object.entries(uses)) {
    for (let i = 0; i < n; i++) {
      const base = { id: `${kind}_${id}_${i}`, type: `${kind}_call`, status: 'completed' };
      if (kind === 'web_search') items.push({ ...base, action: { type: 'search', query: 'mock' } });
      else if (kind === 'file_search') items.push({ ...base, queries: ['mock'], results: null });
      else if (kind === 'image_generation')
        items.push({ ...base, result: MOCK_PNG, revised_prompt: 'mock' });
      else items.push({ ...base, code: '', container_id: `cntr_${id}`, outputs: null });
    }
  }
  return items;
}

/** A Messages server tool use as streamed: its server_tool_use block and its result block. */
export interface ServerToolBlocks {
  /** The tool's name (`web_search`, `web_fetch`). */
  name: string;
  call: object;
  /** The model's input for the tool, one input_json_delta. */
  input: { type: 'input_json_delta'; partial_json: string };
  result: object;
}

/**
 * The content blocks of a Messages call's server tool uses, one pair per use: the model's
 * `server_tool_use` block (`web_search`, `web_fetch`), then the `web_search_tool_result` or
 * `web_fetch_tool_result` block the provider adds.
 */
export function serverToolBlocks(id: string, uses: ToolUses): ServerToolBlocks[] {
  const blocks: ServerToolBlocks[] = [];
  for (const [kind, n] of Object.entries(uses)) {
    if (kind !== 'web_search' && kind !== 'web_fetch') continue;
    for (let i = 0; i < n; i++) {
      const tool_use_id = `srvtoolu_${id}_${kind}_${i}`;
      const search = kind === 'web_search';
      const input = search ? { query: `mock ${i}` } : { url: `https://example.com/${i}` };
      const url = search ? `https://example.com/result/${i}` : input.url;
      blocks.push({
        name: kind,
        call: { type: 'server_tool_use', id: tool_use_id, name: kind, input: {} },
        input: { type: 'input_json_delta', partial_json: JSON.stringify(input) },
        result: search
          ? {
              type: 'web_search_tool_result',
              tool_use_id,
              content: [
                {
                  type: 'web_search_result',
                  url,
                  title: `Result ${i}`,
                  encrypted_content: 'mock',
                  page_age: null,
                },
              ],
            }
          : {
              type: 'web_fetch_tool_result',
              tool_use_id,
              content: { type: 'web_fetch_result', url, content: { type: 'document' } },
            },
      });
    }
  }
  return blocks;
}

/**
 * A Chat Completions search model (OpenAI's `gpt-4o-search-preview`, `gpt-5-search-api`: a
 * name with `-search`) searches the web once on every call it answers, billed per call; its
 * usage does not say so. Any other chat model uses no tool billed per use.
 */
export function chatToolUses(model: string): ToolUses {
  return /-search(-|$)/.test(model) ? { web_search: 1 } : {};
}

/**
 * What a chat search model's searches read, billed as input (`perUse` a search): OpenAI bills
 * search content tokens at the model's input rate, except on its non-reasoning preview models
 * (`gpt-4o-search-preview`, `gpt-4o-mini-search-preview`), whose search content is free.
 */
export function chatToolInput(model: string, perUse: number): number {
  const searches = chatToolUses(model).web_search ?? 0;
  return /-search-preview(-|$)/.test(model) ? 0 : searches * perUse;
}
