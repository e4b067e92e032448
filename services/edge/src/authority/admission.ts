import { randomUUID } from 'node:crypto';
import {
  FILE_ID,
  LIMITS,
  type AdmitRequest,
  type Admitted,
  type ApiSurface,
  type Refused,
  type ToolUseKind,
} from '@holdfast/events';
import { sleep } from '@holdfast/retry';
import { Err, Ok, type Logger, type Result } from '@holdfast/runtime';
import type { Caller } from '../request/auth.js';
import type { AuthorityPort } from '../call/ports.js';
import { EdgeError, itemNotFound, type EdgeErrorCode } from '../errors.js';
import { windowHeaders } from '../request/headers.js';
import type { Hold, Holds } from './holds.js';
import { notRegistered, type RefusalMemory } from './refusal-memory.js';
import type { EdgeMetrics } from '../metrics.js';

export interface AdmissionDeps {
  authority: AuthorityPort;
  holds: Holds;
  /** Answers the repeats of a budget refusal here (absent: every call asks the authority). */
  refusals?: RefusalMemory | undefined;
  metrics: EdgeMetrics;
  logger: Pick<Logger, 'warn' | 'error'>;
  timeoutMs: number;
  /** Whether this edge saw a tenant of the chain suspended (and not resumed since). */
  suspended?: (chain: readonly string[]) => boolean;
  /** The config version this edge serves, sent with each admit (AdmitRequest.configVersion). */
  configVersion?: () => number;
}

export interface AdmissionRequest {
  caller: Caller;
  model: string;
  promptTokens: number;
  maxTokens: number;
  /** true: the edge grows the hold as output arrives (chat), so adaptive mode needs no debt. */
  extensible: boolean;
  /** The surface the call came in on. */
  api: ApiSurface;
  /** The call sends audio (its prompt is held at the dearer input price), asks for audio output. */
  audioInput?: boolean;
  audioOutput?: boolean;
  /** The service tier it is held at (heldServiceTier); `default` when absent. */
  serviceTier?: string;
  /** Its bound on the uses of provider-run tools billed per use (heldToolUses). */
  toolUses?: Partial<Record<ToolUseKind, number>>;
  /** Aborted when the client leaves (a call waiting for upstream capacity stops waiting). */
  signal?: AbortSignal;
  /** The call's end user (end-user budgets, books), if the client named one. */
  endUser?: string | undefined;
  /** The stored response it continues, admitted only for its owner (Asked.previousResponseId). */
  previousResponseId?: string | undefined;
  /** The stored items its input reads by id, admitted only for their owner (Asked.itemIds). */
  itemIds?: string[] | undefined;
}

/** Admitted with a hold, or served unmetered (failOpen tenant, authority unreachable). */
export type Admission =
  { metered: true; admitted: Admitted; hold: Hold } | { metered: false; reservationId: string };

/** Clients that honour Retry-After (the openai SDK waits for any value) should not wait longer. */
const MAX_CLIENT_RETRY_WAIT_S = 60;

/**
 * Asks the authority to admit a call. A refusal becomes the edge error of the same code. An
 * admit that ends without a definitive answer (a timeout, the authority's Redis failing, an
 * internal error, a reply that does not parse) may still have created its hold: its
 * reservation id is released (a release that leaves a tombstone, so a late admit is refused
 * too), and the call fails closed, unless the tenant chose failOpen and the call reads no
 * stored response or item (only the authority knows whose that is: never served unchecked). Only
 * `no_responders` needs no release: no authority received the request. A previous response
 * the tenant does not own is `previous_response_not_found` (a stored item: the 400 of an
 * unknown item), nothing held, nothing remembered.
 */
export async function admit(
  deps: AdmissionDeps,
  req: AdmissionRequest,
): Promise<Result<Admission, EdgeError>> {
  const { caller } = req;
  const tenant = caller.tenant.id;
  if (req.promptTokens > LIMITS.maxPromptTokens) {
    return Err(
      new EdgeError({
        code: 'invalid_request',
        message: `The prompt has ${req.promptTokens.toLocaleString('en-US')} tokens; the limit is ${LIMITS.maxPromptTokens.toLocaleString('en-US')}.`,
        param: 'messages',
      }),
    );
  }
  // A repeat of a budget refusal made moments ago: answered here, counted for its event.
  const recalled = deps.refusals?.recall(req);
  if (recalled) return Err(refusalError(await recalled, tenant));
  const closes = deps.refusals?.closes(caller.tenant.org) ?? 0;
  const reservationId = randomUUID();
  const ref = {
    reservationId,
    tenant,
    org: caller.tenant.org,
    ...(caller.keyId ? { keyId: caller.keyId } : {}),
    ...(req.endUser ? { endUser: req.endUser } : {}),
  };
  const started = performance.now();
  const ask = () => deps.authority.admit(admitBody(req, reservationId, deps), deps.timeoutMs);
  const reply = await untilCapacity(ask, caller.tenant.maxQueueMs, req.signal);
  const seconds = (performance.now() - started) / 1_000;

  if (!reply.ok) {
    deps.metrics.admission.observe({ outcome: reply.error.code }, seconds);
    const { code } = reply.error;
    // Decided before anything was held: nothing to give back.
    if (code === 'response_not_found') return Err(responseNotFound(req));
    if (code === 'item_not_found') return Err(notOwnedItem(reply.error.message, req.api));
    if (code !== 'no_responders') {
      void deps.holds.close(ref, { how: 'release', reason: 'admit_abandoned' });
    }
    const unreachable = code === 'timeout' || code === 'no_responders';
    if (unreachable && caller.tenant.failOpen && deps.suspended?.(caller.tenant.chain)) {
      // Suspended as far as this edge has seen (the authority would refuse it): not served.
      return Err(suspendedError(tenant));
    }
    if (unreachable && caller.tenant.failOpen && !readsStored(req)) {
      deps.metrics.unmetered.inc({ tenant });
      deps.logger.warn({ tenant, reservationId, code }, 'authority unreachable: failing open');
      return Ok({ metered: false, reservationId });
    }
    if (code === 'not_priced') {
      // A tool's price (price.toolUses) or a tier's.
      const tools = reply.error.message.startsWith('price.toolUses');
      // The authority's config has no price for the tier this edge's config priced: the
      // edge's is behind (an admin change on its way). The client's answer is the one a
      // current edge gives, a 400 naming the field; nothing was held.
      return Err(
        new EdgeError({
          code: 'invalid_request',
          message: tools ? `${reply.error.message}.` : `service_tier: ${reply.error.message}.`,
          param: tools ? 'tools' : 'service_tier',
        }),
      );
    }
    if (!unreachable && code !== 'budget_store_unavailable') {
      deps.logger.error({ tenant, code, err: reply.error }, 'admit rejected by the authority');
      return Err(new EdgeError({ code: 'internal', message: 'admit failed', cause: reply.error }));
    }
    return Err(authorityUnavailable());
  }

  const decision = reply.value;
  deps.metrics.admission.observe(
    { outcome: decision.admitted ? 'admitted' : decision.code },
    seconds,
  );
  if (!decision.admitted) {
    deps.refusals?.remember(req, decision, closes);
    return Err(refusalError(decision, tenant));
  }
  const hold = deps.holds.open({
    ...ref,
    org: decision.org ?? ref.org,
    // The model always: its current tool-use prices bill uses reported that nothing held.
    model: req.model,
    ...(decision.upstream ? { upstream: decision.upstream } : {}),
  });
  return Ok({ metered: true, admitted: decision, hold });
}

/** The authority's admit request for a call. */
function admitBody(
  req: AdmissionRequest,
  reservationId: string,
  deps: Pick<AdmissionDeps, 'configVersion' | 'refusals'>,
): AdmitRequest {
  const { caller } = req;
  const configVersion = deps.configVersion?.();
  return {
    reservationId,
    tenant: caller.tenant.id,
    keyId: caller.keyId,
    ...(req.endUser ? { endUser: req.endUser } : {}),
    useCase: caller.useCase,
    model: req.model,
    promptTokens: req.promptTokens,
    maxTokens: req.maxTokens,
    extensible: req.extensible,
    audioInput: req.audioInput === true,
    audioOutput: req.audioOutput === true,
    serviceTier: req.serviceTier ?? 'default',
    ...(req.toolUses && Object.keys(req.toolUses).length > 0 ? { toolUses: req.toolUses } : {}),
    api: req.api,
    ...(req.previousResponseId ? { previousResponseId: req.previousResponseId } : {}),
    ...(req.itemIds && req.itemIds.length > 0 ? { itemIds: req.itemIds } : {}),
    ...(configVersion !== undefined && configVersion > 0 ? { configVersion } : {}),
    // An end_user_limit refusal then names the end users tracked, for the memory.
    ...(deps.refusals?.remembers && req.endUser ? { rememberEndUserCap: true as const } : {}),
  };
}

/**
 * Whether the edge's config registers the call: its use case for the tenant, and the model in
 * that use case. The authority decides (its refusal is recorded as an event); this only says
 * whether the prompt is worth counting first.
 */
export function registered(caller: Caller, model: string): boolean {
  return caller.tenant.useCases.get(caller.useCase)?.models.includes(model) === true;
}

/**
 * A call refused before its prompt is counted, so that a call refused anyway costs no count,
 * and above all no request to the upstream's counting endpoint, whose rate limit every tenant
 * shares. Two cases. A repeat of a refusal remembered of any size (the tenant suspended, at its
 * cap on calls in flight), or of a budget's of a prompt taken as 0 (beforeUpstreamCount):
 * answered from memory, as `admit` would after counting. A call the edge's config does not
 * register: asked of the authority `uncounted` (askUncounted). Before, a key naming any
 * well-formed use case id made one count request a call (the fuzz of every surface found it).
 * With no authority to ask, a failOpen tenant's unregistered call is refused here (it would be
 * served unmetered), and any other tenant's gets the 503 at once (it waited out a second admit
 * after counting). The refusal; or undefined: count the prompt and admit as usual.
 */
export async function refuseUncounted(
  deps: AdmissionDeps,
  req: AdmissionRequest,
): Promise<EdgeError | undefined> {
  const recalled = deps.refusals?.recall(req);
  if (recalled) return refusalError(await recalled, req.caller.tenant.id);
  if (registered(req.caller, req.model)) return undefined;
  const asked = await askUncounted(deps, req);
  if (asked === 'store_down') return authorityUnavailable();
  if (asked !== 'unreachable') return asked;
  return req.caller.tenant.failOpen ? unregistered(req) : authorityUnavailable();
}

/** Thrown by beforeUpstreamCount's check: the call is refused before the upstream counts it. */
export class RefusedUncounted extends Error {
  constructor(readonly refusal: EdgeError) {
    super(refusal.message);
    this.name = 'RefusedUncounted';
  }
}

/**
 * The check a call makes before the first request to a provider's counting endpoint
 * (Anthropic's count_tokens, OpenAI's input_tokens: a PDF, state kept upstream, a model counted
 * by its upstream; not a llama-server's, which no other deployment shares): the authority is
 * asked the call `uncounted`, and refuses it (recorded as any other refusal) when even a prompt
 * of 0 tokens would not fit, so a team over its budget or suspended spends none of the counting
 * limit, which every team shares, however different its documents; the refusal is remembered
 * for its repeats (RefusalMemory answers them before counting). Throws RefusedUncounted; asked
 * at most once a call, and not when the count is answered without a request (RecentCounts).
 * Any other answer, `not_counted` the usual one, goes on to count. What its admit would answer
 * after counting is answered at once instead: a 503 when no authority answers (a failOpen
 * tenant goes on, unless this edge saw it suspended: 403, or the call continues a stored
 * response) or its Redis fails; `previous_response_not_found` for a stored response the tenant
 * does not own (so the upstream never counts another tenant's).
 */
export function beforeUpstreamCount(
  deps: AdmissionDeps,
  req: AdmissionRequest,
): () => Promise<void> {
  let asked: Promise<void> | undefined;
  const check = async () => {
    const answer = await askUncounted(deps, req);
    const { tenant } = req.caller;
    if (answer === 'unreachable' && tenant.failOpen && !readsStored(req)) {
      // Served unmetered, as its admit would, unless this edge saw it suspended.
      if (deps.suspended?.(tenant.chain)) throw new RefusedUncounted(suspendedError(tenant.id));
      return;
    }
    if (answer === 'unreachable' || answer === 'store_down') {
      throw new RefusedUncounted(authorityUnavailable());
    }
    if (answer) throw new RefusedUncounted(answer);
  };
  return () => (asked ??= check());
}

/**
 * The check a count (`/v1/messages/count_tokens`, `/v1/responses/input_tokens`) makes of the
 * stored response and items it names before the upstream counts them, and before it answers:
 * the authority's read-only `owns`, the check its call's admission makes, so another team's id
 * gets the 400 its call would get (byte for byte) and the upstream never reads it. Nothing is
 * held, taken or recorded. No authority answering, or its Redis failing, is the 503 of a call
 * no authority answered, failOpen or not (only the authority knows whose it is). Throws
 * RefusedUncounted; asked at most once a count.
 */
export function beforeOwnedCount(
  deps: Pick<AdmissionDeps, 'authority' | 'logger' | 'timeoutMs'>,
  tenant: string,
  stored: { previousResponseId?: string | undefined; itemIds?: string[] | undefined },
): () => Promise<void> {
  const { previousResponseId, itemIds } = stored;
  if (!previousResponseId && (itemIds?.length ?? 0) === 0) return () => Promise.resolve();
  let asked: Promise<void> | undefined;
  const check = async () => {
    const body = {
      tenant,
      ...(previousResponseId ? { previousResponseId } : {}),
      ...(itemIds && itemIds.length > 0 ? { itemIds } : {}),
    };
    const reply = await deps.authority.owns(body, deps.timeoutMs);
    if (reply.ok) return;
    const { code, message } = reply.error;
    if (code === 'response_not_found') {
      throw new RefusedUncounted(responseNotFound({ previousResponseId }));
    }
    if (code === 'item_not_found') throw new RefusedUncounted(notOwnedItem(message));
    deps.logger.warn({ tenant, code, message }, 'ownership of a count not checked');
    throw new RefusedUncounted(authorityUnavailable('nothing was counted'));
  };
  return () => (asked ??= check());
}

/**
 * Asks the authority an `uncounted` admit (promptTokens 0), which it never admits: it refuses
 * and records the call when its config does not register it or the least prompt would not fit,
 * else answers `not_counted` (the edge counts the prompt and asks again). The refusal, remembered
 * for its repeats as `admit`'s are; undefined: count; 'unreachable': no authority answered;
 * 'store_down': its Redis did not (the admit would fail closed: `budget_store_unavailable`).
 */
async function askUncounted(
  deps: AdmissionDeps,
  req: AdmissionRequest,
): Promise<EdgeError | undefined | 'unreachable' | 'store_down'> {
  const closes = deps.refusals?.closes(req.caller.tenant.org) ?? 0;
  const uncounted = { ...req, promptTokens: 0 };
  const body = {
    ...admitBody(uncounted, randomUUID(), deps),
    uncounted: true as const,
  };
  const started = performance.now();
  const reply = await deps.authority.admit(body, deps.timeoutMs);
  const seconds = (performance.now() - started) / 1_000;
  if (!reply.ok) {
    const { code } = reply.error;
    if (code === 'timeout' || code === 'no_responders') return 'unreachable';
    // Not the tenant's response: refused before the upstream counts it (never remembered).
    if (code === 'response_not_found') return responseNotFound(req);
    if (code === 'item_not_found') return notOwnedItem(reply.error.message, req.api);
    // Its Redis failing: the admit after the count would fail closed, so no count is spent.
    return code === 'budget_store_unavailable' ? 'store_down' : undefined;
  }
  const decision = reply.value;
  if (decision.admitted) {
    // Never answered so (a bug): give it back and go on as a counted call.
    deps.logger.error({ reservationId: body.reservationId }, 'an uncounted admit was admitted');
    void deps.holds.close(
      {
        reservationId: body.reservationId,
        tenant: body.tenant,
        org: decision.org ?? req.caller.tenant.org,
      },
      { how: 'release', reason: 'not_forwarded' },
    );
    return undefined;
  }
  deps.metrics.admission.observe({ outcome: decision.code }, seconds);
  deps.refusals?.remember(uncounted, decision, closes);
  return refusalError(decision, req.caller.tenant.id);
}

/**
 * A previous response the tenant does not own (another tenant's, or none): OpenAI's answer for
 * an unknown id, the same whichever it is.
 */
function responseNotFound(req: Pick<AdmissionRequest, 'previousResponseId'>): EdgeError {
  return new EdgeError({
    code: 'previous_response_not_found',
    message: `Previous response with id '${req.previousResponseId ?? ''}' not found.`,
    param: 'previous_response_id',
  });
}

/**
 * A stored item the tenant does not own (another tenant's, or none): OpenAI's answer for an
 * unknown item, the same whichever it is; the authority's message names the item.
 */
function notOwnedItem(message: string, api?: ApiSurface): EdgeError {
  const id = /'([^']*)'/.exec(message)?.[1] ?? '';
  // A file on Chat Completions is named in a message's `file` part.
  return itemNotFound(id, api === 'chat' && FILE_ID.test(id) ? 'chat-file' : undefined);
}

/** Whether the call reads what the upstream stored (only the authority knows whose it is). */
function readsStored(req: AdmissionRequest): boolean {
  return Boolean(req.previousResponseId) || (req.itemIds?.length ?? 0) > 0;
}

/** A failOpen team this edge saw suspended, while no authority answers. */
function suspendedError(tenant: string): EdgeError {
  return new EdgeError({
    code: 'tenant_suspended',
    message: `Team ${tenant} is suspended. Calls resume when its budget window frees room or an admin resumes it.`,
  });
}

/** The 503 of a call (or a count) no authority answered (the tenant not failOpen). */
function authorityUnavailable(what = 'the call was not admitted'): EdgeError {
  return new EdgeError({
    code: 'budget_authority_unavailable',
    message: `The budget authority is unavailable, so ${what}. Retry shortly.`,
    headers: { 'retry-after': '1' },
  });
}

/** The 403 the authority would give a call this config does not register, said by the edge. */
function unregistered(req: AdmissionRequest): EdgeError {
  return new EdgeError(notRegistered(req));
}

type AdmitResult = Awaited<ReturnType<AuthorityPort['admit']>>;

/**
 * Asks again while the only thing in the way is the upstream's capacity and the tenant may
 * still wait (`maxQueueMs`, default 0: not at all): every 250 ms at first, no later than the
 * window says room frees, never past the tenant's deadline or the client's leaving.
 */
async function untilCapacity(
  ask: () => Promise<AdmitResult>,
  maxQueueMs: number,
  signal: AbortSignal | undefined,
): Promise<AdmitResult> {
  const deadline = Date.now() + maxQueueMs;
  for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, 2_000)) {
    const reply = await ask();
    if (!reply.ok || reply.value.admitted || reply.value.code !== 'upstream_capacity') return reply;
    // No Retry-After: the call is more than its share of the upstream's minute; it never fits.
    if (reply.value.retryAfterSeconds === null) return reply;
    const left = deadline - Date.now();
    if (left <= 0 || signal?.aborted) return reply;
    const roomIn = (reply.value.retryAfterSeconds ?? 1) * 1_000;
    if (!(await sleep(Math.min(waitMs, roomIn, left), signal))) return reply;
  }
}

function refusalError(r: Refused, tenant: string): EdgeError {
  const headers = windowHeaders(r.windows, tenant);
  if (r.retryAfterSeconds !== null) headers['retry-after'] = String(r.retryAfterSeconds);
  // The openai SDK sleeps for any Retry-After it gets; tell it not to when waiting is long.
  if (r.retryAfterSeconds === null || r.retryAfterSeconds > MAX_CLIENT_RETRY_WAIT_S) {
    headers['x-should-retry'] = 'false';
  }
  const code: EdgeErrorCode = r.code === 'reservation_closed' ? 'internal' : r.code;
  return new EdgeError({ code, message: r.message, headers, context: { budget: r.budget } });
}
