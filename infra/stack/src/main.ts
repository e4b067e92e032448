import { loadSettings, type StackSettings } from './env.js';
import { formatLine, prefix } from './log-format.js';
import { ProcessGroup, StartError } from './process.js';
import { NATS_CLUSTER_PROCESSES } from './nats-cluster.js';
import { REDIS_CLUSTER_PROCESSES } from './redis-cluster.js';
import { PROCESS_ORDER, startStack } from './stack.js';
import { removeStackState } from './state.js';
import { summary } from './summary.js';

/** `pnpm stack`: runs the whole stack as local processes until Ctrl-C (or SIGTERM). */
const NAMES: readonly string[] = [
  ...PROCESS_ORDER,
  ...NATS_CLUSTER_PROCESSES,
  ...REDIS_CLUSTER_PROCESSES,
  'stack',
];

function settingsOrExit(): StackSettings {
  try {
    return loadSettings();
  } catch (err) {
    process.stderr.write(`pnpm stack: ${(err as Error).message}\n`);
    process.exit(2);
  }
}

const settings = settingsOrExit();
const format = { width: 13, colour: !settings.env.NO_COLOR && process.stdout.isTTY };
const print = (name: string, line: string) =>
  process.stdout.write(`${prefix(name, NAMES.indexOf(name), format)} ${line}\n`);
const say = (line: string) => print('stack', line);
const group = new ProcessGroup((name, line) => print(name, formatLine(line)));

async function shutdown(why: string, code: number): Promise<void> {
  say(`${why}: stopping everything, last started first`);
  const exits = await group.stop();
  await removeStackState(settings.dir);
  let clean = true;
  for (const { name, exit } of exits) {
    if (exit.signal === 'SIGKILL' || (exit.code ?? 0) !== 0) clean = false;
    say(`${name} exited (${exit.signal ?? `code ${exit.code}`})`);
  }
  say('stopped');
  process.exit(code !== 0 || clean ? code : 1);
}

function onSignal(signal: NodeJS.Signals): void {
  if (group.stopping) {
    say(`${signal} again: killing what is left`);
    group.kill();
    process.exit(1);
  }
  void shutdown(signal, 0);
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// If the runner itself goes away, its children (own process groups) must not outlive it.
process.on('exit', () => group.kill());

try {
  const stack = await startStack(settings, group);
  process.stdout.write(summary(stack, settings.dir));
  const { name, exit } = await group.firstExit();
  if (!group.stopping) {
    await shutdown(`${name} exited unexpectedly (${exit.signal ?? `code ${exit.code}`})`, 1);
  }
} catch (err) {
  if (!group.stopping) {
    const message = err instanceof StartError ? err.message : String(err);
    say(`failed to start: ${message}`);
    await shutdown('start failed', 1);
  }
}
