import { readFileSync } from 'node:fs';

/** Linux reports utime/stime in USER_HZ ticks, which is 100 on every architecture Node runs on. */
const MICROS_PER_TICK = 10_000;

/**
 * utime + stime of a `/proc/<pid>/stat` line, in µs: all threads of the process, including
 * threads that have exited. The command name (field 2) may hold spaces and parentheses, so
 * fields are counted from the last `)`.
 */
export function parseStatCpu(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): utime is field 14, stime field 15.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) {
    throw new Error(`not a /proc/<pid>/stat line: ${stat.slice(0, 80)}`);
  }
  return (utime + stime) * MICROS_PER_TICK;
}

/** A `/proc/<pid>/<file>` of each process (by name), parsed; a process that is gone reads as `gone`. */
function readEach<T>(
  pids: Readonly<Record<string, number>>,
  file: string,
  parse: (text: string) => T,
  gone: T,
): Record<string, T> {
  const out: Record<string, T> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      out[name] = parse(readFileSync(`/proc/${pid}/${file}`, 'utf8'));
    } catch {
      out[name] = gone;
    }
  }
  return out;
}

/** CPU µs used so far by each process (by name); a process that is gone reads as NaN. */
export function readCpu(pids: Readonly<Record<string, number>>): Record<string, number> {
  return readEach(pids, 'stat', parseStatCpu, NaN);
}

/** System calls a process made: `read`-family and `write`-family (sockets, pipes, files). */
export interface Syscalls {
  reads: number;
  writes: number;
}

/**
 * `syscr` and `syscw` of a `/proc/<pid>/io` file: read and write system calls of every
 * thread of the process so far. A count, not a time: the box's load does not move it, only
 * how many messages and how they are coalesced into writes.
 */
export function parseIo(io: string): Syscalls {
  const field = (name: string) => Number(new RegExp(`^${name}:\\s*(\\d+)$`, 'm').exec(io)?.[1]);
  const reads = field('syscr');
  const writes = field('syscw');
  if (!Number.isFinite(reads) || !Number.isFinite(writes)) {
    throw new Error(`not a /proc/<pid>/io file: ${io.slice(0, 80)}`);
  }
  return { reads, writes };
}

/** System calls so far by process (by name); a process that is gone reads as NaN. */
export function readSyscalls(pids: Readonly<Record<string, number>>): Record<string, Syscalls> {
  return readEach(pids, 'io', parseIo, { reads: NaN, writes: NaN });
}

/** The whole machine's busy CPU µs so far (all cores), from the first line of `/proc/stat`. */
export function parseMachineBusy(procStat: string): number {
  const cpu = procStat.split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = cpu;
  return (user + nice + system + irq + softirq + steal) * MICROS_PER_TICK;
}

export function readMachineBusy(): number {
  return parseMachineBusy(readFileSync('/proc/stat', 'utf8'));
}
