import type { RpcError } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';

/**
 * An error of an authority request (usage, suspend, config) as the edge answers it. Admission
 * has its own mapping (admission.ts, beside this file), with failOpen; these requests always fail closed.
 */
export function fromAuthority(err: RpcError): EdgeError {
  switch (err.code) {
    case 'invalid_config':
      return new EdgeError({ code: 'invalid_config', message: `Invalid config: ${err.message}` });
    case 'version_conflict':
      return new EdgeError({ code: 'version_conflict', message: `Conflict: ${err.message}.` });
    case 'invalid_request':
    case 'not_priced':
      return new EdgeError({ code: 'invalid_request', message: `Invalid request: ${err.message}` });
    case 'timeout':
    case 'no_responders':
    case 'budget_store_unavailable':
      return new EdgeError({
        code: 'budget_authority_unavailable',
        message: 'The budget authority is unavailable. Retry shortly.',
        headers: { 'retry-after': '1' },
        cause: err,
      });
    case 'request_too_large':
      // Nothing was sent: say what was too big (a config document, say), and by how much.
      return new EdgeError({
        code: 'request_too_large',
        message: `Too large for the budget authority: ${err.message}.`,
        cause: err,
      });
    case 'reply_too_large':
    case 'not_counted':
    case 'response_not_found':
    case 'item_not_found':
    case 'internal':
      // reply_too_large: the authority's answer (usage of every tenant, the whole config) is
      // over NATS's max_payload; logged here and by the authority, a 500 to the client.
      // not_counted, response_not_found and item_not_found answer an admit only
      // (admission.ts), never these requests.
      return new EdgeError({ code: 'internal', message: err.message, cause: err });
  }
}
