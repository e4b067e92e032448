import type { Redis } from 'ioredis';

/**
 * Sends the commands a connection is given in one turn of the event loop in one write(2)
 * (issue 14): the socket is corked at the turn's first command and uncorked at `setImmediate`,
 * once the turn's callbacks and their microtasks have run, as the patched NATS client flushes.
 * A batch's script calls then reach Redis as one read, run in one pass of its event loop (one
 * AOF write and fsync) and come back in one reply, instead of a system call each on both sides.
 * Nothing waits for company: a command alone in its turn leaves at the end of that turn.
 * Commands keep their order (one socket, one queue of replies); a pipeline still writes itself.
 */
export function corkEachTurn(redis: Redis): void {
  const send = redis.sendCommand.bind(redis);
  let corked = false;
  redis.sendCommand = (command, stream) => {
    // Undefined before the first connect, whatever the typings say.
    const socket = redis.stream as typeof redis.stream | undefined;
    if (!corked && stream === undefined && socket !== undefined) {
      corked = true;
      socket.cork();
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    }
    return send(command, stream);
  };
}
