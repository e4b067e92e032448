import { Ajv } from 'ajv';
import { inputJsonSchema } from '../json-schema.js';
import { AdmitRequest, ExtendRequest, RenewRequest } from './admit.js';
import type { BatchedOperation } from './operations.js';
import { ReleaseRequest, SettleRequest, USAGE_RULES } from './settle.js';
import type { z } from 'zod';

/**
 * An exact fast verdict on a request body for a strict zod schema (issue 14): ajv compiled from
 * zod's own JSON Schema, with the options that make ajv judge as zod does (patterns without the
 * `u` flag, formats checked by the patterns zod emits beside them, defaults filled in place,
 * unknown keys refused as `z.strictObject` refuses them). `rules` are the schema's refinements,
 * which JSON Schema cannot say: the same predicates its `.refine`s call. true: the body,
 * defaults filled, is what zod would output (deeply equal). false: ask zod, whose verdict and
 * error stand. `request-check.unit.test.ts` holds both verdicts and outputs equal.
 */
function requestCheck<S extends z.ZodType>(
  schema: S,
  rules: readonly ((value: z.output<S>) => boolean)[] = [],
): (body: unknown) => boolean {
  let validate: ((v: unknown) => boolean) | undefined;
  return (body) => {
    validate ??= compile(schema);
    return validate(body) && rules.every((rule) => rule(body as z.output<S>));
  };
}

let ajv: Ajv | undefined;

function compile(schema: z.ZodType): (v: unknown) => boolean {
  ajv ??= new Ajv({
    removeAdditional: false,
    useDefaults: true,
    unicodeRegExp: false,
    validateFormats: false,
    allErrors: false,
    strict: false,
  });
  return ajv.compile(inputJsonSchema(schema));
}

/** The call path's requests (every call's admit and settle), each checked fast. */
export const CALL_PATH_CHECKS = {
  admit: requestCheck(AdmitRequest),
  extend: requestCheck(ExtendRequest),
  renew: requestCheck(RenewRequest),
  settle: requestCheck(SettleRequest, [(r) => USAGE_RULES.every((rule) => rule.holds(r.usage))]),
  release: requestCheck(ReleaseRequest),
} satisfies Record<BatchedOperation, (body: unknown) => boolean>;
