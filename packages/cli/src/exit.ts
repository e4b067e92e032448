/** Exit codes of `holdfast`, for scripts. */
export const EXIT = {
  ok: 0,
  /** Anything else: a 5xx, a reply that makes no sense. */
  failed: 1,
  /** The command line is wrong (unknown command, missing option). */
  usage: 2,
  /** The config or the request was refused as invalid (local validation, 400, 413). */
  invalid: 3,
  /** No admin token, a wrong one (401, 403), or the admin API is disabled on the edge. */
  auth: 4,
  /** An unknown tenant, key, ... (404). */
  notFound: 5,
  /** The config moved past --expected-version, or the id is taken (409). */
  conflict: 6,
  /** The edge or the budget authority cannot be reached now: retrying later may work. */
  unavailable: 7,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The exit code for an error answer of the edge (status and OpenAI-style error code). */
export function exitFor(status: number, code: string | undefined): ExitCode {
  if (code === 'admin_disabled' || status === 401 || status === 403) return EXIT.auth;
  if (status === 404) return EXIT.notFound;
  if (status === 409) return EXIT.conflict;
  if (status === 400 || status === 413 || status === 422) return EXIT.invalid;
  if (status === 503) return EXIT.unavailable;
  return EXIT.failed;
}
