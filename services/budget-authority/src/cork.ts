import type { Redis } from 'ioredis';
import type { RedisClient } from './redis.js';

/** What rides with a connection's next turn of commands (rideNextTurn), by connection. */
const riders = new WeakMap<Redis, (() => void)[]>();

/**
 * Sends the commands a connection is given in one turn of the event loop in one write(2)
 * (issue 14): the socket is corked at the turn's first command and uncorked at `setImmediate`,
 * once the turn's callbacks and their microtasks have run, as the patched NATS client flushes.
 * A batch's script calls then reach Redis as one read, run in one pass of its event loop (one
 * AOF write and fsync) and come back in one reply, instead of a system call each on both sides.
 * Nothing waits for company: a command alone in its turn leaves at the end of that turn.
 * Commands keep their order (one socket, one queue of replies); a pipeline still writes itself.
 * What waits in rideNextTurn is sent in a microtask of the turn's first command: in its write.
 */
export function corkEachTurn(redis: Redis): void {
  const send = redis.sendCommand.bind(redis);
  const waiting: (() => void)[] = [];
  riders.set(redis, waiting);
  let corked = false;
  redis.sendCommand = (command, stream) => {
    // Undefined before the first connect, whatever the typings say.
    const socket = redis.stream as typeof redis.stream | undefined;
    if (!corked && stream === undefined && socket !== undefined) {
      corked = true;
      socket.cork();
      if (waiting.length > 0) queueMicrotask(() => board(waiting));
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    }
    return send(command, stream);
  };
}

function board(waiting: (() => void)[]): void {
  for (const ride of waiting.splice(0)) ride();
}

/**
 * Runs `ride` (which sends commands on `redis`) in the next turn in which something else sends
 * a command on that connection, so they share its write and Redis's pass; false, and nothing
 * kept, when the connection is not corked by corkEachTurn (a Redis Cluster client: its nodes
 * are, not it). The caller bounds the wait itself (a command may not come).
 */
function rideNextTurn(redis: RedisClient, ride: () => void): boolean {
  const waiting = riders.get(redis as Redis);
  if (!waiting) return false;
  waiting.push(ride);
  return true;
}

/**
 * XDELs `ids` of `key` in the next turn in which the authority sends another command on the
 * connection (so Redis runs both in one pass, with one AOF write and fsync), or alone after
 * `waitMs` (at once when 0, or when the connection cannot carry it). Resolves with XDEL's reply.
 */
export function deleteRiding(
  redis: RedisClient,
  key: string,
  ids: string[],
  waitMs: number,
): Promise<number> {
  return new Promise((resolve, reject) => {
    let sent = false;
    const send = () => {
      if (sent) return;
      sent = true;
      clearTimeout(timer);
      redis.xdel(key, ...ids).then(resolve, reject);
    };
    const timer = setTimeout(send, waitMs);
    if (waitMs === 0 || !rideNextTurn(redis, send)) send();
  });
}
