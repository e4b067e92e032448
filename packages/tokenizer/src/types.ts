/**
 * The parts of an OpenAI Chat Completions / Embeddings request that cost prompt tokens. The
 * shapes are structural and loose on purpose: a parsed request body (or the `openai` package's
 * param types) can be passed as is; unknown fields are ignored, unknown part types still count.
 */

/** A content part of a message: `text`, `image_url`, `refusal`, or anything else (counted as its JSON). */
export interface PromptContentPart {
  type: string;
  text?: string;
  refusal?: string;
  image_url?: { url: string; detail?: string | null };
}

interface PromptFunctionDefinition {
  name: string;
  description?: string | null;
  /** A JSON Schema object. */
  parameters?: Record<string, unknown> | null;
}

export interface PromptTool {
  type: string;
  function?: PromptFunctionDefinition;
}

export interface PromptToolCall {
  /** Rendered by some templates (Mistral checks it is 9 characters). */
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

export interface PromptMessage {
  role: string;
  content?: string | readonly PromptContentPart[] | null;
  name?: string | null;
  refusal?: string | null;
  tool_calls?: readonly PromptToolCall[] | null;
  /** On `tool` messages; rendered by some templates (Mistral's `call_id`). */
  tool_call_id?: string | null;
  function_call?: { name?: string; arguments?: string } | null;
}

export interface ChatPromptRequest {
  /** Picks the vision cost table for image parts. */
  model: string;
  messages: readonly PromptMessage[];
  tools?: readonly PromptTool[] | null;
  /** `"none" | "auto" | "required" | { type: "function", function: { name } }`. */
  tool_choice?: unknown;
  /** Deprecated form of `tools`. */
  functions?: readonly PromptFunctionDefinition[] | null;
  /** Deprecated form of `tool_choice`: `"none" | "auto" | { name }`. */
  function_call?: unknown;
  /** A `json_schema` format counts its schema as prompt text. */
  response_format?: unknown;
}

/** Embeddings `input`: text, texts, or already tokenized input. */
export type EmbeddingInput =
  string | readonly string[] | readonly number[] | readonly (readonly number[])[];
