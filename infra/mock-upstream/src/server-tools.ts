/**
 * What a provider-run tool adds to the input a call is billed: the search results, fetched
 * pages or tool output the model reads before it answers, which no count of the request can
 * see (the counting endpoints do not include it). A flat figure per tool the request offers.
 */
const SERVER_TOOL_INPUT_TOKENS = 5_000;

/** Responses tools the client runs itself; any other type runs at the provider. */
const CLIENT_TOOLS = new Set(['function', 'custom']);

/** Anthropic's server tools (the client runs the others: custom, bash, text editor, ...). */
const ANTHROPIC_SERVER_TOOL = /^(web_search|web_fetch|code_execution)_/;

export function responsesToolInput(tools: readonly { type: string }[] | null | undefined): number {
  return SERVER_TOOL_INPUT_TOKENS * (tools ?? []).filter((t) => !CLIENT_TOOLS.has(t.type)).length;
}

export function messagesToolInput(body: { tools?: readonly object[] }): number {
  const servers = (body as { mcp_servers?: unknown }).mcp_servers;
  const tools = (body.tools ?? []) as readonly { type?: unknown }[];
  const server = tools.filter(
    (t) => typeof t.type === 'string' && ANTHROPIC_SERVER_TOOL.test(t.type),
  ).length;
  return SERVER_TOOL_INPUT_TOKENS * (server + (Array.isArray(servers) ? servers.length : 0));
}
