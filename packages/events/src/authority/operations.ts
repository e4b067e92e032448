/** The authority's request-reply operations; subject `<authorityPrefix>.<operation>`. */
export type AuthorityOperation =
  | 'admit'
  | 'extend'
  | 'renew'
  | 'settle'
  | 'release'
  | 'usage'
  | 'suspend'
  | 'resume'
  | 'config.get'
  | 'config.apply'
  | 'capacity.report';

/** Queue group every authority replica joins, so each request is answered once. */
export const AUTHORITY_QUEUE = 'holdfast-authority';

/**
 * Errors travel in headers, never as free-form bodies. A reply with `Holdfast-Error` set has
 * an empty body; refusals (budget exceeded, ...) are normal replies, not errors.
 */
export const ERROR_HEADER = 'Holdfast-Error';
export const ERROR_MESSAGE_HEADER = 'Holdfast-Error-Message';

export type AuthorityErrorCode =
  /** The request did not match its schema. Nothing changed. */
  | 'invalid_request'
  /** Redis did not answer: fail closed, nothing admitted. */
  | 'budget_store_unavailable'
  /** The config document was rejected; the message names the fields. */
  | 'invalid_config'
  /** config.apply with an `expectedVersion` that is no longer the stored one. Nothing changed. */
  | 'version_conflict'
  /** A bug; details are in the authority's log. */
  | 'internal';
