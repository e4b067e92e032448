import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ServiceProcess {
  child: ChildProcess;
  /** Every stdout/stderr line so far (pino JSON lines for our services). */
  lines: string[];
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<number | NodeJS.Signals>;
  /** kill -9: no shutdown hooks run. */
  crash(): Promise<void>;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
}

/**
 * Starts a Node entry point (a service's dist/main.js) as a real child process and waits until
 * it logs `msg: "ready"`. Used by crash tests: `crash()` is a real kill -9.
 */
export async function startService(
  entry: string,
  env: Record<string, string>,
  opts: {
    readyTimeoutMs?: number;
    readyMessage?: string;
    /** Flags for node itself (`--trace-gc`, `--cpu-prof`: NODE_OPTIONS refuses them). */
    nodeArgs?: readonly string[];
  } = {},
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), entry], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const exited = new Promise<number | NodeJS.Signals>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ?? code ?? 0)),
  );
  const readyMessage = opts.readyMessage ?? '"msg":"ready"';
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(
            `${entry} not ready after ${opts.readyTimeoutMs ?? 20_000} ms:\n${lines.slice(-20).join('\n')}`,
          ),
        ),
      opts.readyTimeoutMs ?? 20_000,
    );
    const onLine = (line: string) => {
      lines.push(line);
      if (line.includes(readyMessage)) {
        clearTimeout(timer);
        resolve();
      }
    };
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(
          `${entry} exited (${String(code)}) before ready:\n${lines.slice(-20).join('\n')}`,
        ),
      );
    });
  });
  await ready;
  return {
    child,
    lines,
    exited,
    crash: async () => {
      child.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * The port a service bound, read from its `ready` line (`field`: `port` for the edge, `opsPort`
 * for the others). Tests start services on port 0 and read the port here: a port picked free
 * beforehand can be taken by another test's connection before the child binds it (EADDRINUSE).
 */
export function readyPort(proc: ServiceProcess, field: 'port' | 'opsPort'): number {
  const line = proc.lines.find((l) => l.includes('"msg":"ready"'));
  const port = line ? (JSON.parse(line) as Record<string, unknown>)[field] : undefined;
  if (typeof port !== 'number' || port <= 0) {
    throw new Error(`no ${field} in the ready line: ${line ?? '(no ready line)'}`);
  }
  return port;
}
