import type { ServerResponse } from 'node:http';
import { Socket } from 'node:net';

/**
 * The connection a response goes out on. A pipelined response (HTTP/1.1: its request came on
 * a keep-alive socket before the answer to the one before it) has no `socket` until every
 * response before it has finished; its request's socket is the same connection.
 */
export function connectionOf(res: ServerResponse): Socket | null | undefined {
  return res.socket ?? (res.req as { socket?: Socket | null } | undefined)?.socket;
}

/**
 * Calls `fn` once when the response closes, or its connection does before the response has
 * one: Node never closes a pipelined response still waiting for its turn when the client
 * hangs up (only the responses that have their socket). Returns what stops watching.
 */
export function onResponseGone(res: ServerResponse, fn: () => void): () => void {
  const waiting = res.socket ? undefined : connectionOf(res);
  let done = false;
  const stop = () => {
    res.off('close', fire);
    waiting?.off('close', fire);
  };
  function fire() {
    if (done) return;
    done = true;
    stop();
    fn();
  }
  res.once('close', fire);
  if (waiting?.closed) setImmediate(fire);
  else waiting?.once('close', fire);
  return () => {
    done = true;
    stop();
  };
}

/**
 * Once the edge has written all of a reply (its call settled), the client must take the rest
 * with no pause longer than `ms`, else its connection is closed (node's socket timeout, which
 * any progress of the writes renews; node puts its keep-alive timeout in its place once the
 * reply is out). Node gives a reply it is still writing no deadline: a client that stopped
 * reading kept its connection, and the reply the edge had not written yet (up to
 * EDGE_STREAM_LAG_BYTES, counted in its tenant's open bytes), for ever.
 */
export function untilTaken(res: ServerResponse, ms: number): void {
  // A pipelined reply waiting for its turn: from its turn on, not during the ones before it.
  // Only a connection has a deadline: an injected request (fastify's inject, light-my-request)
  // has a stand-in socket without one.
  const time = (socket: unknown) => {
    if (socket instanceof Socket) socket.setTimeout(ms);
  };
  if (res.socket) time(res.socket);
  else res.once('socket', time);
}
