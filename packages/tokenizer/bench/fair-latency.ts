/**
 * One tenant's counting against another's: tenant B counts a 20,000-character prompt (about
 * 5,000 o200k tokens) every 50 ms, alone and while tenant A keeps its calls in flight full of
 * large prompts, and B's count latency (submit to answer, on the same event loop) and the
 * event-loop delay are reported. Then the inline path: a 370-token chat counted inline, one
 * call after another, in µs a call. With `--root`, the TokenCounter built in that checkout
 * (packages/tokenizer/dist) runs beside this one, phase by phase, in the same process: compare
 * the two as ratios.
 *
 *   pnpm build && pnpm --filter @holdfast/tokenizer bench:fair --root /work/main
 *   options: --rounds 3 --seconds 8 --flood 32 --flood-mib 1 --inline-calls 20000
 *            --only phases|inline
 */
import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as current from '@holdfast/tokenizer';
import type { ChatPromptRequest, TokenizerName } from '@holdfast/tokenizer';
import { corpus, slicer } from './corpus.js';

const { values: args } = parseArgs({
  options: {
    root: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
    flood: { type: 'string', default: '32' },
    'flood-mib': { type: 'string', default: '1' },
    'inline-calls': { type: 'string', default: '20000' },
    /** `phases` or `inline`: run only those (default both). */
    only: { type: 'string' },
    /** Internal: measure the inline path alone in this (child) process, `<code>:<kind>`. */
    'inline-child': { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const FLOOD = Number(args.flood);
const FLOOD_CHARS = Math.round(Number(args['flood-mib']) * 1024 * 1024);
const INLINE_CALLS = Number(args['inline-calls']);

/** The one method both versions share (the old one ignores the owner argument). */
interface Counter {
  countChat(r: ChatPromptRequest, t: TokenizerName, owner?: { tenant: string }): Promise<number>;
  warmUp(tokenizers: readonly TokenizerName[]): Promise<void>;
  stats(): { inline: number; pooled: number };
  close(): Promise<void>;
}
interface Code {
  name: string;
  make(): Counter;
}

const codes: Code[] = [{ name: 'new', make: () => new current.TokenCounter() }];
if (args.root) {
  const entry = join(resolve(args.root), 'packages/tokenizer/dist/index.js');
  const old = (await import(pathToFileURL(entry).href)) as typeof current;
  codes.unshift({ name: 'old', make: () => new old.TokenCounter() });
}

const english = slicer(corpus());
// Japanese, 3 UTF-8 bytes a character: 10 MiB of body is about 3.5M characters.
const JAPANESE = '予算は呼び出しごとに最悪の場合を確保し、実際の使用量で精算します。';
const chat = (content: string): ChatPromptRequest => ({
  model: 'gpt-4o',
  messages: [{ role: 'user', content }],
});

interface Flood {
  inFlight: number;
  tokenizer: TokenizerName;
  prompt: () => string;
}
interface Phase {
  label: string;
  flood?: Flood;
}

const PHASES: Phase[] = [
  { label: 'B alone' },
  {
    label: `B + A: ${FLOOD} x ${args['flood-mib']} MiB o200k`,
    flood: { inFlight: FLOOD, tokenizer: 'o200k_base', prompt: () => english(FLOOD_CHARS) },
  },
  {
    label: 'B + A: 4 x 10 MiB estimate (CJK)',
    flood: {
      inFlight: 4,
      tokenizer: 'estimate',
      prompt: () => JAPANESE.repeat(Math.ceil((10 * 1024 * 1024) / 3 / JAPANESE.length)),
    },
  },
];

interface Result {
  b: number[];
  aCounts: number;
  aRefused: number;
  loopP99: number;
  loopMax: number;
}

/**
 * A keeps `inFlight` counts going, the next one sent in a later turn of the event loop (as a
 * new request would arrive); a refused one (its bound) comes back after a second.
 */
async function floodLoop(
  counter: Counter,
  flood: Flood,
  stopped: () => boolean,
  tally: Result,
): Promise<void> {
  while (!stopped()) {
    try {
      await counter.countChat(chat(flood.prompt()), flood.tokenizer, { tenant: 'a' });
      tally.aCounts += 1;
      await setImmediate();
    } catch (err) {
      if (stopped()) return;
      if (!(err instanceof current.CountQueueFull)) throw err;
      tally.aRefused += 1;
      await sleep(1_000);
    }
  }
}

async function runPhase(code: Code, phase: Phase): Promise<Result> {
  const counter = code.make();
  await counter.warmUp(['o200k_base']);
  const result: Result = { b: [], aCounts: 0, aRefused: 0, loopP99: 0, loopMax: 0 };
  let stop = false;
  const flood = phase.flood;
  const floods = flood
    ? Array.from({ length: flood.inFlight }, () => floodLoop(counter, flood, () => stop, result))
    : [];
  if (flood) await sleep(500);
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const pending: Promise<void>[] = [];
  const end = performance.now() + SECONDS * 1_000;
  while (performance.now() < end) {
    const sent = performance.now();
    const answered = counter.countChat(chat(english(20_000)), 'o200k_base', { tenant: 'b' });
    pending.push(answered.then(() => void result.b.push(performance.now() - sent)));
    await sleep(50);
  }
  await Promise.all(pending);
  delay.disable();
  result.loopP99 = delay.percentile(99) / 1e6;
  result.loopMax = delay.max / 1e6;
  stop = true;
  await counter.close();
  await Promise.allSettled(floods);
  return result;
}

/**
 * µs a call of a 370-token chat (1,500 characters) counted inline, awaited one after another:
 * the same chat every time (its text in the count cache, as a repeated system prompt), or a
 * different one each time (more text than the cache keeps: counted every time). Run in a
 * child process of its own (a fresh heap, not the floods' garbage), printed as JSON.
 */
async function inlineCost(code: Code, distinct: boolean): Promise<InlineCost> {
  const counter = code.make();
  await counter.warmUp(['o200k_base']);
  const fixed = chat(english(1_500));
  const requests = distinct ? Array.from({ length: INLINE_CALLS }, () => chat(english(1_500))) : [];
  for (let i = 0; i < 500; i++) await counter.countChat(fixed, 'o200k_base', { tenant: 'b' });
  const started = performance.now();
  for (let i = 0; i < INLINE_CALLS; i++) {
    await counter.countChat(requests[i] ?? fixed, 'o200k_base', { tenant: 'b' });
  }
  const us = ((performance.now() - started) * 1_000) / INLINE_CALLS;
  const { pooled } = counter.stats();
  await counter.close();
  return { us, pooled };
}

interface InlineCost {
  us: number;
  /** Counts that went to the pool (a tenant sent there by its slow inline counts). */
  pooled: number;
}

function inlineCostInChild(code: Code, kind: 'same' | 'distinct'): InlineCost {
  const script = fileURLToPath(import.meta.url);
  const argv = [...process.execArgv, script, '--inline-child', `${code.name}:${kind}`];
  if (args.root) argv.push('--root', args.root);
  argv.push('--inline-calls', String(INLINE_CALLS));
  const out = execFileSync(process.execPath, argv, { encoding: 'utf8' }).trim().split('\n');
  return JSON.parse(out.at(-1)!) as InlineCost;
}

if (args['inline-child']) {
  const [name, kind] = args['inline-child'].split(':');
  const code = codes.find((c) => c.name === name)!;
  console.log(JSON.stringify(await inlineCost(code, kind === 'distinct')));
  process.exit(0);
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
}

const fmt = (x: number, digits = 1) => x.toFixed(digits).padStart(9);

console.log(
  `bench:fair: ${codes.map((c) => c.name).join(' and ')}${args.root ? ` (old: ${args.root})` : ''}; ` +
    `${ROUNDS} rounds, ${SECONDS} s a phase, B: 20,000 characters every 50 ms`,
);
const phaseResults = new Map<string, Result[]>();
const inlineResults = new Map<string, InlineCost[]>();
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which code goes first, round by round.
  const order = round % 2 === 0 ? codes : [...codes].reverse();
  for (const phase of args.only === 'inline' ? [] : PHASES) {
    for (const code of order) {
      const key = `${phase.label}|${code.name}`;
      const r = await runPhase(code, phase);
      phaseResults.set(key, [...(phaseResults.get(key) ?? []), r]);
      console.log(
        `  round ${round + 1} ${phase.label} ${code.name}: B p50 ${percentile(r.b, 50).toFixed(1)} ms, p99 ${percentile(r.b, 99).toFixed(1)} ms (${r.b.length}), A ${r.aCounts} counted ${r.aRefused} refused, loop p99 ${r.loopP99.toFixed(1)} ms`,
      );
    }
  }
  for (const kind of args.only === 'phases' ? [] : (['same', 'distinct'] as const)) {
    for (const code of order) {
      const key = `${kind}|${code.name}`;
      inlineResults.set(key, [...(inlineResults.get(key) ?? []), inlineCostInChild(code, kind)]);
    }
  }
}

console.log('\nB (20,000-character prompts), pooled over rounds');
console.log(
  'phase                               code    p50 ms    p99 ms   calls  A counted  A refused  loop p99 ms  loop max ms',
);
for (const phase of PHASES) {
  for (const code of codes) {
    const rs = phaseResults.get(`${phase.label}|${code.name}`) ?? [];
    const b = rs.flatMap((r) => r.b);
    const sum = (f: (r: Result) => number) => rs.reduce((n, r) => n + f(r), 0);
    console.log(
      `${phase.label.padEnd(35)} ${code.name.padEnd(4)} ${fmt(percentile(b, 50))} ${fmt(percentile(b, 99))} ${String(b.length).padStart(7)} ${String(sum((r) => r.aCounts)).padStart(10)} ${String(sum((r) => r.aRefused)).padStart(10)} ${fmt(Math.max(...rs.map((r) => r.loopP99)), 1).padStart(12)} ${fmt(Math.max(...rs.map((r) => r.loopMax)), 1).padStart(12)}`,
    );
  }
}
console.log('\ninline 370-token chat, µs a call (median of rounds)');
for (const kind of ['same', 'distinct']) {
  const line = codes.map((c) => {
    const runs = inlineResults.get(`${kind}|${c.name}`) ?? [];
    const us = runs.map((r) => r.us);
    const pooled = runs.reduce((n, r) => n + r.pooled, 0);
    return { name: c.name, us: percentile(us, 50), runs: us, pooled };
  });
  const ratio = line.length === 2 ? `  new/old ${(line[1]!.us / line[0]!.us).toFixed(3)}` : '';
  console.log(
    `${kind.padEnd(9)} ${line.map((l) => `${l.name} ${l.us.toFixed(2)} (${l.runs.map((x) => x.toFixed(2)).join(', ')}; ${l.pooled} pooled)`).join('   ')}${ratio}`,
  );
}
