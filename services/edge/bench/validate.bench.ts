/**
 * What checking a call's body costs the edge (issue 14): a typical chat, responses and messages
 * body as the SDKs send them, each freshly parsed as fastify hands it over, validated by zod
 * alone (today's validator on a schema no fast path knows) and by the route's validator (the
 * fast check, zod only for what it does not pass). µs of CPU per body, the JSON.parse taken
 * off (parsing each just before, as fastify does, keeps it young and in cache: bodies parsed
 * all beforehand measured both sides slower); the median of rounds, interleaved, because this
 * machine is shared and noisy.
 * `pnpm --filter @holdfast/edge bench:validate` (BENCH_ROUNDS 7, BENCH_ITERATIONS 20000).
 */
import type { z } from 'zod';
import { zodValidatorCompiler } from '../src/schemas/validate.js';
import { ChatRequest } from '../src/surfaces/chat/schema.js';
import { MessagesRequest } from '../src/surfaces/messages/schema.js';
import { ResponsesRequest } from '../src/surfaces/responses/schema.js';
import { CHAT_BODY, MESSAGES_BODY, RESPONSES_BODY } from '../test/sdk-bodies.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 20_000);

type Validate = (body: unknown) => { value?: unknown; error?: unknown };

/** µs per body: parse `json` and run `validate` on it, ITERATIONS times. */
function time(json: string, validate: Validate): number {
  const start = process.cpuUsage();
  for (let i = 0; i < ITERATIONS; i++) {
    if (validate(JSON.parse(json)).error) throw new Error('a bench body was refused');
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / ITERATIONS;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function bench(name: string, schema: z.ZodType, body: unknown): void {
  const json = JSON.stringify(body);
  const compile = (s: z.ZodType) => zodValidatorCompiler({ schema: s } as never) as Validate;
  const scenarios: Record<string, Validate> = {
    parse: (b) => ({ value: b }),
    zod: compile(schema.clone()),
    fast: compile(schema),
  };
  const runs: Record<string, number[]> = { parse: [], zod: [], fast: [] };
  for (const v of Object.values(scenarios)) time(json, v); // warm up (JIT, compile)
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, v] of Object.entries(scenarios)) runs[k]!.push(time(json, v));
  }
  const parse = median(runs.parse!);
  const zod = median(runs.zod!) - parse;
  const fast = median(runs.fast!) - parse;
  const cell = (x: number) => x.toFixed(1).padStart(6);
  const ratio = (zod / fast).toFixed(1);
  console.log(
    `${name.padEnd(10)} ${String(json.length).padStart(6)} B  zod ${cell(zod)} µs  fast ${cell(fast)} µs  (${ratio}x; JSON.parse ${cell(parse)} µs)`,
  );
}

console.log(`validation of one body, µs of CPU (median of ${ROUNDS} x ${ITERATIONS})`);
bench('chat', ChatRequest, CHAT_BODY);
bench('responses', ResponsesRequest, RESPONSES_BODY);
bench('messages', MessagesRequest, MESSAGES_BODY);
// A longer conversation (the tool round trip ten times over): where zod's cost grows.
const turns = CHAT_BODY.messages.slice(1);
const long = { ...CHAT_BODY, messages: [CHAT_BODY.messages[0], ...Array(10).fill(turns).flat()] };
bench('chat x10', ChatRequest, long);
