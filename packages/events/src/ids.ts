import { z } from 'zod';

/**
 * Identifiers that travel through NATS subjects, Redis keys and SQL. They are validated at
 * every boundary, so no dot, space, wildcard or non-ASCII character reaches a subject or key.
 */

/** A tenant (team or org): lowercase, as docs/configuration.md fixes it. Used as a NATS subject token. */
export const TenantId = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must match [a-z0-9][a-z0-9_-]{0,63}');
export type TenantId = z.infer<typeof TenantId>;

/** Use case, key and webhook ids: letters, digits, '_' and '-'. */
export const PlainId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'must match [A-Za-z0-9][A-Za-z0-9_-]{0,63}');
export const UseCaseId = PlainId;
export const KeyId = PlainId;

/** Model ids carry dots and slashes in the wild ("gpt-3.5-turbo", "Qwen/Qwen2.5-7B"). */
export const ModelId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, 'must match [A-Za-z0-9][A-Za-z0-9._:/-]{0,127}');

/** Reservation and event ids are UUIDs (lowercase, canonical form). */
export const Uuid = z
  .string()
  .regex(
    /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    'must be a lowercase UUID',
  );

/**
 * An end user as Holdfast keys budgets by it: what the client called it (OpenAI `user`,
 * Anthropic `metadata.user_id`, `x-holdfast-user`), when printable ASCII of at most 128
 * characters without ';' or ','; else `sha256:` and 32 hex digits of it (edge: endUserId).
 */
export const EndUserId = z
  .string()
  .regex(/^[\x21-\x2b\x2d-\x3a\x3c-\x7e]{1,128}$|^sha256:[0-9a-f]{32}$/, 'must be an end user id');

/**
 * A stored response as the Responses API names it (`resp_` and hex at OpenAI): what a call's
 * `previous_response_id` names, and what its settle records as its tenant's (a Redis key part:
 * no `:`, `{`, `}` or space reaches it).
 */
export const ResponseId = z
  .string()
  .regex(
    /^resp_[A-Za-z0-9_-]{1,200}$/,
    "must be a response id: resp_ and 1 to 200 letters, digits, '_' or '-'",
  );

/**
 * A stored Responses item (an output item of a stored response: `msg_`, `fc_`, `rs_`, ...), as
 * an input item names it by id (`item_reference`, a reasoning item without its content), or a
 * code execution container a call made (Responses `cntr_`, Messages `container_`), as a later
 * call names it to reuse it: a Redis key part, as ResponseId.
 */
export const ItemId = z
  .string()
  .regex(
    /^[a-z]{2,9}_[A-Za-z0-9_-]{1,200}$/,
    "must be an item id: 2 to 9 lowercase letters, '_', and 1 to 200 letters, digits, '_' or '-'",
  );

/** A code execution container's id (ItemId), as Responses (`cntr_`) and Messages name one. */
export const CONTAINER_ID = /^(cntr|container)_/;

/**
 * A file a call's code wrote (ItemId): an Anthropic Files API file (`file_`), as a code
 * execution output reports one and a later call names one (`container_upload`, a `file`
 * source), or a file in an OpenAI code interpreter container (`cfile_`), as a message cites
 * one (`container_file_citation`) and a later Responses call names one (`input_file`,
 * `input_image`). The provider keeps it for every team of the upstream account, so one a
 * call's output made is owned by its team, across orgs (the authority's `fileOwner` key). A
 * file nobody's call made (the operator's upload; OpenAI's `file-...` never is one) is no
 * team's, and every team may read it.
 */
export const FILE_ID = /^c?file_/;

/**
 * An audio reply of Chat Completions (ItemId; `audio_`): the provider keeps it for the whole
 * upstream account, and an assistant message brings it back by id (`audio: {id}`), so it is
 * owned by the team whose call made it, as a stored Responses item is.
 */
export const AUDIO_ID = /^audio_/;

/**
 * Sealed content a call's output carried (a reasoning item's `encrypted_content`), named by its
 * digest (ItemId: `ec_` and its SHA-256 in hex). The provider opens sealed content for every
 * team of the upstream account, whatever `store` says, so it is owned by the team whose call
 * got it, as a stored item is.
 */
export const SEALED_ID = /^ec_/;

/**
 * Ids owned by the first team whose call got them, recorded in one slot for every org (the
 * provider's account is every org's) and refused only to another team: a file a code execution
 * output made, sealed content. One no call is recorded with (an operator's upload; sealed
 * content relayed before the upgrade, or by a call whose settle has not been recorded yet, on
 * another edge) is every team's: the provider refuses what it did not seal.
 */
export const firstOwned = (id: string): boolean => FILE_ID.test(id) || SEALED_ID.test(id);

/** The most stored item ids a settle records, or an admit checks, for one call. */
export const MAX_ITEM_IDS = 256;

/** The pseudo-tenant of events that belong to no tenant (config.changed). */
export const SYSTEM_TENANT = '_system';

/**
 * A service tier as a provider names it (OpenAI `service_tier`: default, flex, priority,
 * scale; Anthropic `usage.service_tier`: standard, priority, batch): lowercase, so it is safe
 * in a Lua pattern, a Redis record and SQL.
 */
export const ServiceTierName = z
  .string()
  .regex(/^[a-z][a-z0-9_]{0,31}$/, 'must match [a-z][a-z0-9_]{0,31}');
