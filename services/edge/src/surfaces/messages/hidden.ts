import {
  hiddenInputTokens,
  toolUseKind,
  type HiddenInputTokens,
  type ModelConfig,
} from '@holdfast/config';
import type { ProviderTool } from '../../call/unseen.js';

/**
 * The input of a Messages call that the request does not show: what the tools the provider
 * runs read (refused or given the model's allowance: call/unseen.ts), and what Anthropic adds
 * to the prompt itself (held on top of a local count: hiddenInput).
 */

type Tools =
  readonly { name: string; type?: string | null; max_uses?: unknown }[] | null | undefined;

/** What hiddenInput reads of a request. */
interface Prompt {
  tools?: Tools;
  system?: unknown;
  messages: readonly { content: unknown }[];
}

/**
 * Anthropic's built-in client tools by type (`bash_20250124`, `text_editor_20250728`,
 * `computer_20251124`, `memory_20250818`, ...): the client runs them, and the request names them
 * by type only while Anthropic bills their whole definitions as input. Each maps to the figure
 * of `hiddenInputTokens` that bounds it.
 */
const BUILT_IN_TOOL = /^(bash|text_editor|computer|memory)_\w+$/;
const FIGURE = {
  bash: 'bash',
  text_editor: 'textEditor',
  computer: 'computer',
  memory: 'memory',
} as const satisfies Record<string, keyof HiddenInputTokens>;

function builtInTool(type: string): keyof HiddenInputTokens | undefined {
  const kind = BUILT_IN_TOOL.exec(type)?.[1] as keyof typeof FIGURE | undefined;
  return kind && FIGURE[kind];
}

/**
 * The Messages server tools (web search, web fetch, code execution: any type but the client's
 * own, none or `custom`, and the built-ins), then the MCP servers, then the agent skills a
 * `container` loads (Anthropic puts each skill's description in the prompt and its files are
 * read into the context when the model uses it: input no count sees). A search or a fetch
 * reads on each use (counted), up to its `max_uses`; the others once.
 */
export function messagesProviderTools(body: {
  tools?: Tools;
  mcp_servers?: unknown;
  container?: unknown;
}): ProviderTool[] {
  const tools = (body.tools ?? []).flatMap((t, i) =>
    t.type != null && t.type !== 'custom' && !builtInTool(t.type)
      ? [
          {
            param: `tools.${i}`,
            what: `the ${t.type} server tool`,
            counted: toolUseKind('anthropic', t.type) !== undefined,
            maxUses: t.max_uses,
          },
        ]
      : [],
  );
  const servers = Array.isArray(body.mcp_servers) ? body.mcp_servers : [];
  const container = body.container as { skills?: unknown } | null | undefined;
  const skills = Array.isArray(container?.skills) ? (container.skills as unknown[]) : [];
  return [
    ...tools,
    ...servers.map(() => ({ param: 'mcp_servers', what: 'an MCP server', counted: false })),
    ...skills.map((_, i) => ({
      param: `container.skills.${i}`,
      what: 'an agent skill',
      counted: false,
    })),
  ];
}

/**
 * The input Anthropic adds to a Messages call that the request does not show, bounded for a
 * prompt the edge counts itself (any tokenizer but `upstream`, or when count_tokens cannot
 * answer; count_tokens counts it already), at the model's `hiddenInputTokens`
 * (docs/budgets.md): the tool-use system prompt whenever tools are offered (whatever
 * tool_choice), each built-in client tool's definition (computer use with its own system
 * prompt), and what citations add to the system prompt when a block enables them.
 */
export function hiddenInput(
  body: Prompt,
  model: Pick<ModelConfig, 'hiddenInputTokens'> | undefined,
): number {
  const figures = hiddenInputTokens(model);
  let total = citations(body) ? figures.citations : 0;
  if (!body.tools?.length) return total;
  total += figures.toolUse;
  for (const tool of body.tools) {
    const figure = tool.type ? builtInTool(tool.type) : undefined;
    if (figure) total += figures[figure];
  }
  return total;
}

type Block = { type?: unknown; citations?: { enabled?: unknown } | null; content?: unknown } | null;

const enables = (b: unknown) => (b as Block)?.citations?.enabled === true;

/**
 * Some block of the system, a message or a tool result (the one level Anthropic nests blocks
 * at, read without recursion: a deeply nested body cannot exhaust the stack) enables citations.
 */
function citations(body: Prompt): boolean {
  const blocks = (content: unknown): unknown[] => (Array.isArray(content) ? content : []);
  const inMessage = (block: unknown) =>
    enables(block) ||
    ((block as Block)?.type === 'tool_result' && blocks((block as Block)?.content).some(enables));
  return (
    blocks(body.system).some(enables) ||
    body.messages.some((m) => blocks(m.content).some(inMessage))
  );
}
