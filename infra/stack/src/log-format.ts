/** Turns one line of a child's output into one prefixed, readable line of the stack's output. */

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

/** Fields every pino line has that the prefix and the message already say. */
const IMPLIED = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

const COLOURS = [36, 35, 33, 32, 34, 96, 95, 93, 92, 94] as const;

export interface LineFormat {
  /** Width the process names are padded to. */
  width: number;
  colour: boolean;
}

/** ANSI colour of a process's prefix (stable per position), or none. */
export function prefix(name: string, index: number, format: LineFormat): string {
  const padded = `${name.padEnd(format.width)} |`;
  if (!format.colour) return padded;
  return `\u001b[${COLOURS[index % COLOURS.length]}m${padded}\u001b[0m`;
}

/**
 * A pino JSON line becomes `12:00:01.123 INFO  ready port=8080 configVersion=1`; anything
 * else (nats-server, redis-server) is passed through as it is.
 */
export function formatLine(line: string): string {
  if (!line.startsWith('{')) return line;
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const level = typeof entry.level === 'number' ? (LEVELS[entry.level] ?? 'INFO') : 'INFO';
  const time = typeof entry.time === 'string' ? entry.time.slice(11, 23) : '';
  const fields = Object.entries(entry)
    .filter(([key]) => !IMPLIED.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  const msg = typeof entry.msg === 'string' ? entry.msg : '';
  return [time, level.padEnd(5), msg, ...fields].filter((p) => p !== '').join(' ');
}
