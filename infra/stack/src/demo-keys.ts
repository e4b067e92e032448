import { createHash } from 'node:crypto';
import type { CompiledConfig } from '@holdfast/config';

export interface DemoKey {
  tenant: string;
  key: string;
}

/**
 * The demo keys a config accepts: `sk-hf-demo-<tenant>` for every tenant holding the hash of
 * that secret (the example config's teams). A config without them prints none.
 */
export function demoKeys(config: CompiledConfig): DemoKey[] {
  const found: DemoKey[] = [];
  for (const tenant of config.tenants.values()) {
    const key = `sk-hf-demo-${tenant.id}`;
    const hash = createHash('sha256').update(key).digest('hex');
    if (config.keysByHash.get(hash)?.tenant === tenant.id) found.push({ tenant: tenant.id, key });
  }
  return found;
}
