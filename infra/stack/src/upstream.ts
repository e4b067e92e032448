/** The model the edge calls for one of the example config's upstreams (its `baseUrlEnv`). */
export interface UpstreamChoice {
  baseUrl: string;
  /** For the summary: where calls go and why. */
  describe: string;
}

export const OPENAI_API_URL = 'https://api.openai.com/v1';
export const ANTHROPIC_API_URL = 'https://api.anthropic.com';

/** Each provider's variables: its key, the URL that overrides it, and its own API. */
const PROVIDERS = {
  openai: { key: 'OPENAI_API_KEY', base: 'OPENAI_BASE_URL', url: OPENAI_API_URL },
  anthropic: { key: 'ANTHROPIC_API_KEY', base: 'ANTHROPIC_BASE_URL', url: ANTHROPIC_API_URL },
} as const;

/**
 * The mock by default; `<PROVIDER>_BASE_URL` when set; the provider itself when only its key
 * is set (docs/operations.md: a real provider when its key is set). The edge sends the key upstream. The
 * example config has one upstream per provider: `default` (OpenAI's API) and `claude`
 * (Anthropic's); the mock speaks both.
 */
export function chooseUpstream(
  env: Partial<
    Record<
      'OPENAI_API_KEY' | 'OPENAI_BASE_URL' | 'ANTHROPIC_API_KEY' | 'ANTHROPIC_BASE_URL',
      string
    >
  >,
  mockUrl: string,
  provider: keyof typeof PROVIDERS = 'openai',
): UpstreamChoice {
  const p = PROVIDERS[provider];
  const base = env[p.base];
  if (base) return { baseUrl: base, describe: `${base} (${p.base})` };
  if (env[p.key]) {
    return { baseUrl: p.url, describe: `${p.url} (${p.key} is set; unset it to use the mock)` };
  }
  return { baseUrl: mockUrl, describe: `the mock, ${mockUrl}` };
}
