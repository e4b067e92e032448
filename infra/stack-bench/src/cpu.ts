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

/** CPU µs used so far by each process (by name); a process that is gone reads as NaN. */
export function readCpu(pids: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      out[name] = parseStatCpu(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      out[name] = NaN;
    }
  }
  return out;
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
