import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { compileConfig, type CompiledConfig } from './compile.js';
import { renderPath } from './paths.js';
import { HoldfastConfigSchema, NewConfigSchema } from './rules.js';
import { HoldfastConfigShape } from './schema.js';
import { didYouMean, fieldsAt } from './suggest.js';
import { BaseError, Err, Ok, type Result } from '@holdfast/events';

export type ConfigResult = Result<CompiledConfig, ConfigError>;

/** What one issue says; an unknown field gets the closest known one, or the known ones. */
function describe(issue: z.core.$ZodIssue, schema: z.ZodType | undefined): string {
  if (issue.code !== 'unrecognized_keys' || schema === undefined) return issue.message;
  const known = fieldsAt(schema, issue.path);
  return issue.keys
    .map((key) => {
      const guess = didYouMean(key, known);
      if (guess) return `unknown field "${key}" (did you mean "${guess}"?)`;
      return `unknown field "${key}"${known.length > 0 ? ` (known: ${known.join(', ')})` : ''}`;
    })
    .join('; ');
}

/**
 * Renders zod issues as `tenants[id=support-bot].budgets[month-tokens].limit: message`, one per
 * line. With the document, list items are named by their id (positions where it has none);
 * with the schema, an unknown field is answered with the field that was probably meant.
 */
export function formatIssues(
  issues: readonly z.core.$ZodIssue[],
  doc?: unknown,
  schema?: z.ZodType,
): string[] {
  return issues.map(
    (issue) => `${renderPath(issue.path, doc) || '(root)'}: ${describe(issue, schema)}`,
  );
}

/**
 * Validates a config document: YAML/JSON text or an already-parsed object. Never throws: a bad
 * document is an `Err` whose ConfigError lists every bad field, `source` naming it. A document
 * read back from the store (`limits: false`) is not held to CONFIG_LIMITS: it was applied
 * under the limits of its time, and a limit added since must not stop it from loading.
 */
export function parseConfig(
  document: unknown,
  source = 'document',
  opts: { limits?: boolean } = {},
): ConfigResult {
  let raw: unknown = document;
  if (typeof document === 'string') {
    try {
      raw = parseYaml(document, { maxAliasCount: 100 }) ?? {};
    } catch (err) {
      return Err(
        new ConfigError(source, [`(document): not valid YAML: ${(err as Error).message}`]),
      );
    }
  }
  const schema = opts.limits === false ? HoldfastConfigSchema : NewConfigSchema;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    return Err(
      new ConfigError(source, formatIssues(parsed.error.issues, raw, HoldfastConfigShape)),
    );
  }
  return Ok(compileConfig(parsed.data));
}

/**
 * Whether a document declares nothing at all: an empty object, or YAML text of comments or
 * `null` only. Applied as a declared document it would remove everything the last one declared
 * (every tenant, with no declared record), which is never what someone sending a whole config
 * meant; one that means it says `tenants: []`. Text that is not YAML is not empty (its apply
 * reports why).
 */
export function isEmptyDocument(document: unknown): boolean {
  let raw: unknown = document;
  if (typeof document === 'string') {
    try {
      raw = parseYaml(document, { maxAliasCount: 100 });
    } catch {
      return false;
    }
  }
  if (raw === null || raw === undefined) return true;
  return typeof raw === 'object' && !Array.isArray(raw) && Object.keys(raw).length === 0;
}

class ConfigError extends BaseError<'invalid_config'> {
  constructor(
    readonly source: string,
    readonly errors: string[],
  ) {
    super({
      code: 'invalid_config',
      message: `invalid config ${source}:\n  ${errors.join('\n  ')}`,
      context: { source },
    });
  }
}

/** Reads and validates the config file; throws a ConfigError that names every bad field. */
export async function loadConfigFile(path: string): Promise<CompiledConfig> {
  const text = await readFile(path, 'utf8');
  const result = parseConfig(text, path);
  if (!result.ok) throw result.error;
  return result.value;
}
