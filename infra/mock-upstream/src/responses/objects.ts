import type { Billed } from '../usage.js';
import type { ResponsesBody } from './schema.js';

/** What the model writes for one Responses call. */
export interface ResponsesOutput {
  /** Reasoning tokens (an output item with no visible text). */
  reasoning: number;
  /** Its reasoning item's `encrypted_content` (sealed.ts), when the request included it. */
  sealed: string | null;
  /** A message, or a function call when tool_choice forces one. */
  call: { name: string; callId: string } | null;
  /** The visible output, in stream pieces with their token counts. */
  pieces: { text: string; tokens: number }[];
  /** The cap (max_output_tokens) ended it. */
  incomplete: boolean;
  /**
   * The files its code interpreter calls wrote in their container, which the message cites
   * (`container_file_citation` annotations), as OpenAI's does.
   */
  files?: { containerId: string; fileId: string }[];
  /**
   * The MCP tool call the model asks the client to approve (an `mcp_approval_request` item,
   * before its answer), as OpenAI's does when an `mcp` tool requires approval.
   */
  approval?: { id: string; serverLabel: string };
}

/** The `mcp_approval_request` item of a response that asks for one. */
export function approvalItem(approval: NonNullable<ResponsesOutput['approval']>) {
  return {
    id: approval.id,
    type: 'mcp_approval_request',
    server_label: approval.serverLabel,
    name: 'search',
    arguments: '{}',
  };
}

export const visibleTokens = (out: ResponsesOutput) => out.pieces.reduce((n, p) => n + p.tokens, 0);
const text = (out: ResponsesOutput) => out.pieces.map((p) => p.text).join('');

type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

export function reasoningItem(id: string, out: ResponsesOutput) {
  const item = { id: `rs_${id}`, type: 'reasoning', summary: [] };
  return out.sealed === null ? item : { ...item, encrypted_content: out.sealed };
}

/** The message or function-call item, `sofar` of its text written. */
export function visibleItem(
  id: string,
  out: ResponsesOutput,
  status: ItemStatus,
  sofar = text(out),
) {
  if (out.call) {
    return {
      id: `fc_${id}`,
      type: 'function_call',
      status,
      arguments: sofar,
      call_id: out.call.callId,
      name: out.call.name,
    };
  }
  return {
    id: `msg_${id}`,
    type: 'message',
    status,
    role: 'assistant',
    content: status === 'in_progress' ? [] : [outputText(sofar, citations(out))],
  };
}

export function outputText(value: string, annotations: object[] = []) {
  return { type: 'output_text', text: value, annotations, logprobs: [] };
}

/** The message's citations of the files its code wrote. */
function citations(out: ResponsesOutput): object[] {
  return (out.files ?? []).map((f) => ({
    type: 'container_file_citation',
    container_id: f.containerId,
    file_id: f.fileId,
    filename: 'output.csv',
    start_index: 0,
    end_index: 0,
  }));
}

/** All output items of a finished response. A cap spent on reasoning leaves no message. */
export function outputItems(id: string, out: ResponsesOutput): object[] {
  const items: object[] = out.approval ? [approvalItem(out.approval)] : [];
  if (out.reasoning > 0) items.push(reasoningItem(id, out));
  if (out.pieces.length > 0 || !out.incomplete) {
    items.push(visibleItem(id, out, out.incomplete ? 'incomplete' : 'completed'));
  }
  return items;
}

export function responsesUsage(b: Billed) {
  return {
    input_tokens: b.promptTokens,
    input_tokens_details: { cached_tokens: b.cachedTokens, cache_write_tokens: 0 },
    output_tokens: b.completionTokens,
    output_tokens_details: { reasoning_tokens: b.reasoningTokens },
    total_tokens: b.promptTokens + b.completionTokens,
  };
}

/** The `response` object at some point of its life. */
export function responseObject(
  id: string,
  body: ResponsesBody,
  createdAt: number,
  serviceTier: string,
  state:
    | { status: 'in_progress' }
    | {
        status: 'completed' | 'incomplete';
        output: object[];
        usage: ReturnType<typeof responsesUsage>;
      },
) {
  const done = state.status !== 'in_progress';
  return {
    id: `resp_${id}`,
    object: 'response',
    created_at: createdAt,
    status: state.status,
    background: false,
    error: null,
    incomplete_details: state.status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: null,
    model: body.model,
    output: done ? state.output : [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    service_tier: serviceTier,
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: body.text ?? { format: { type: 'text' }, verbosity: 'medium' },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    usage: done ? state.usage : null,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}
