import { Budget, Key, Model, Tenant, UseCase } from '@holdfast/config';
import { BudgetId, KeyId, ModelId, TenantId, UseCaseId } from '@holdfast/events';
import { z } from 'zod';

/**
 * Request schemas of the admin API. Bodies reuse the config schema's own parts, so the API
 * accepts exactly what the config file does (the authority validates the whole document again).
 */
export const TenantParams = z.object({ tenant: TenantId });
export const BudgetParams = z.object({ tenant: TenantId, budget: BudgetId });
export const UseCaseParams = z.object({ tenant: TenantId, useCase: UseCaseId });
export const KeyParams = z.object({ tenant: TenantId, key: KeyId });
/** An end user as the client called it (the route hashes it the way admission does). */
export const EndUserParams = z.object({ tenant: TenantId, user: z.string().min(1).max(512) });
export const ModelParams = z.object({ model: ModelId });

/** `?expectedVersion=N` on every change: refused with 409 when the config moved past N. */
export const VersionQuery = z.object({
  expectedVersion: z.coerce.number().int().min(0).optional(),
});
export const KeysQuery = z.object({ tenant: TenantId.optional() });
/** PUT /admin/config: `?mode=replace` drops what the admin API changed; `merge` keeps it. */
export const ConfigPutQuery = VersionQuery.extend({
  mode: z.enum(['merge', 'replace']).default('merge'),
});
export type ConfigPutQuery = z.infer<typeof ConfigPutQuery>;

export const TenantBody = Tenant;
/** Settings of a tenant; `null` removes an optional one. Budgets, use cases, keys: own routes. */
export const TenantPatch = z.record(z.string(), z.unknown());
export const BudgetBody = Budget.omit({ window: true, unit: true });
export const UseCaseBody = UseCase.omit({ id: true });
export const KeyBody = Key.omit({ sha256: true });
/** What a key's PATCH may change (its id and secret stay; rotate by creating another key). */
export const KeyPatch = z
  .strictObject({
    defaultUseCase: Key.shape.defaultUseCase.nullable(),
    budgets: Key.shape.budgets.unwrap(),
    allowUserHeader: z.boolean(),
    maxEndUsers: Key.shape.maxEndUsers.unwrap().nullable(),
  })
  .partial();
export const PriceBody = Model.shape.price;
export const SuspendBody = z
  .strictObject({
    reason: z.string().min(1).max(500).optional(),
    /** Calls in flight may settle for this long; new calls are refused at once. */
    graceMs: z.int().min(0).max(3_600_000).optional(),
  })
  .nullish();

export type TenantParams = z.infer<typeof TenantParams>;
export type VersionQuery = z.infer<typeof VersionQuery>;
