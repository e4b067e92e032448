import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { compileConfig, type CompiledConfig } from './compile.js';
import { HoldfastConfigSchema } from './rules.js';

export type ConfigResult = { ok: true; config: CompiledConfig } | { ok: false; errors: string[] };

/** Renders zod issues as `tenants[0].budgets[1].limit: message`, one per line. */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((issue) => {
    const path = issue.path
      .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`))
      .join('');
    return `${path || '(root)'}: ${issue.message}`;
  });
}

/** Validates a config document: YAML/JSON text or an already-parsed object. Never throws. */
export function parseConfig(document: unknown): ConfigResult {
  let raw: unknown = document;
  if (typeof document === 'string') {
    try {
      raw = parseYaml(document, { maxAliasCount: 100 }) ?? {};
    } catch (err) {
      return { ok: false, errors: [`(document): not valid YAML: ${(err as Error).message}`] };
    }
  }
  const parsed = HoldfastConfigSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, errors: formatIssues(parsed.error.issues) };
  return { ok: true, config: compileConfig(parsed.data) };
}

export class ConfigError extends Error {
  constructor(
    readonly source: string,
    readonly errors: string[],
  ) {
    super(`invalid config ${source}:\n  ${errors.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the config file; throws a ConfigError that names every bad field. */
export async function loadConfigFile(path: string): Promise<CompiledConfig> {
  const text = await readFile(path, 'utf8');
  const result = parseConfig(text);
  if (!result.ok) throw new ConfigError(path, result.errors);
  return result.config;
}
