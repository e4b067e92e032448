import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { REPO_ROOT } from '@holdfast/stack';

const DOCKERFILE = resolve(REPO_ROOT, 'infra/docker/Dockerfile');

export interface ParsedDockerfile {
  /** Instructions with continuation lines joined, comments dropped. */
  instructions: Array<{ op: string; args: string }>;
  /** Sources of every COPY from the build context (not `--from=<stage>`). */
  contextSources: string[];
  /** The HEALTHCHECK's exec-form command, e.g. ['CMD', 'node', '-e', '...']. */
  healthcheck: string[];
}

/** Just enough of Dockerfile syntax for our one file: instructions, COPY, HEALTHCHECK. */
export function dockerfile(path = DOCKERFILE): ParsedDockerfile {
  const joined = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ');
  const instructions = joined
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [op = '', ...rest] = l.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
  const contextSources = instructions
    .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
    .flatMap((i) => {
      const parts = i.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      return parts.slice(0, -1);
    });
  const health = instructions.find((i) => i.op === 'HEALTHCHECK');
  const cmd = health?.args.slice(health.args.indexOf('CMD ') + 4);
  return {
    instructions,
    contextSources,
    healthcheck: cmd ? ['CMD', ...(JSON.parse(cmd) as string[])] : [],
  };
}
