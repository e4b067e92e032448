/** The model the edge calls for the example config's upstream (`baseUrlEnv: OPENAI_BASE_URL`). */
export interface UpstreamChoice {
  baseUrl: string;
  /** For the summary: where calls go and why. */
  describe: string;
}

export const OPENAI_API_URL = 'https://api.openai.com/v1';

/**
 * The mock by default; OPENAI_BASE_URL when set; OpenAI itself when only OPENAI_API_KEY is
 * set (SPEC: a real provider when its key is set). The edge sends OPENAI_API_KEY upstream.
 */
export function chooseUpstream(
  env: { OPENAI_API_KEY?: string | undefined; OPENAI_BASE_URL?: string | undefined },
  mockUrl: string,
): UpstreamChoice {
  if (env.OPENAI_BASE_URL) {
    return { baseUrl: env.OPENAI_BASE_URL, describe: `${env.OPENAI_BASE_URL} (OPENAI_BASE_URL)` };
  }
  if (env.OPENAI_API_KEY) {
    return {
      baseUrl: OPENAI_API_URL,
      describe: `${OPENAI_API_URL} (OPENAI_API_KEY is set; unset it to use the mock)`,
    };
  }
  return { baseUrl: mockUrl, describe: `the mock, ${mockUrl}` };
}
