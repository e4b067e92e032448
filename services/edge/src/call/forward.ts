import { isControlledField } from '@holdfast/config';

/**
 * The body the edge sends upstream: only fields it knows the meaning of, with every length and
 * count field set to what the hold paid for. `known` is the surface's own field list (OpenAI's
 * Chat Completions, Responses, Anthropic's Messages); the upstream's `passThrough` adds more.
 * A field dropped here is reported back to the client in `x-holdfast-dropped-fields`.
 */
export function forwardedBody(
  body: Record<string, unknown>,
  opts: {
    known: ReadonlySet<string>;
    passThrough: readonly string[];
    /** Length and count fields with their admitted values (the rest are removed). */
    set: Record<string, unknown>;
  },
): { body: Record<string, unknown>; dropped: string[] } {
  const out: Record<string, unknown> = {};
  const dropped: string[] = [];
  const allowed = new Set(opts.passThrough);
  for (const [name, value] of Object.entries(body)) {
    if (name in opts.set) continue;
    if (isControlledField(name) || (!opts.known.has(name) && !allowed.has(name))) {
      dropped.push(name);
      continue;
    }
    out[name] = value;
  }
  // Ollama's options carry its own output length: forwarded (when allowed) with it set.
  if (allowed.has('options') && isRecord(out.options)) {
    const { num_predict: _n, ...options } = out.options;
    const length = opts.set.max_tokens ?? opts.set.max_completion_tokens;
    out.options = typeof length === 'number' ? { ...options, num_predict: length } : options;
  }
  for (const [name, value] of Object.entries(opts.set)) {
    if (value !== undefined) out[name] = value;
  }
  return { body: out, dropped };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
