import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { expect, test } from 'vitest';
import { OpenRequests } from './open-requests.js';

const MiB = 1_048_576;
const refusal = (r: ReturnType<OpenRequests['open']>) => (r.ok ? undefined : r.error);
const response = () => new EventEmitter() as unknown as ServerResponse & EventEmitter;

test("a tenant's requests are refused at its maxInFlight, and counted again once one closes", () => {
  const open = new OpenRequests({
    tenantBodyBytes: 100 * MiB,
    bodyBytes: 100 * MiB,
    bodyLimitBytes: MiB,
  });
  const first = response();
  expect(open.open('a', 2, '10', first).ok).toBe(true);
  expect(open.open('a', 2, '10', response()).ok).toBe(true);
  expect(refusal(open.open('a', 2, '10', response()))).toEqual({ why: 'in_flight', cap: 2 });
  // Another tenant, and a tenant without a cap, are not held back.
  expect(open.open('b', 2, '10', response()).ok).toBe(true);
  first.emit('close');
  expect(open.open('a', 2, '10', response()).ok).toBe(true);
});

test("a tenant's open bodies are bounded by bytes whatever its maxInFlight; every tenant's too", () => {
  const open = new OpenRequests({
    tenantBodyBytes: 25 * MiB,
    bodyBytes: 40 * MiB,
    bodyLimitBytes: 10 * MiB,
  });
  const a = [response(), response()];
  expect(open.open('a', undefined, String(10 * MiB), a[0]!).ok).toBe(true);
  expect(open.open('a', undefined, String(10 * MiB), a[1]!).ok).toBe(true);
  expect(refusal(open.open('a', undefined, String(10 * MiB), response()))).toEqual({
    why: 'tenant_bytes',
    cap: 25 * MiB,
  });
  // A smaller body still fits under the tenant's bound.
  expect(open.open('a', undefined, String(5 * MiB), response()).ok).toBe(true);
  expect(open.bytes('a')).toBe(25 * MiB);
  // Another tenant has its own bound, under the edge's.
  expect(open.open('b', undefined, String(10 * MiB), response()).ok).toBe(true);
  expect(refusal(open.open('b', undefined, String(10 * MiB), response()))).toEqual({
    why: 'edge_bytes',
    cap: 40 * MiB,
  });
  a[0]!.emit('close');
  expect(open.bytes()).toBe(25 * MiB);
  expect(open.open('b', undefined, String(10 * MiB), response()).ok).toBe(true);
});

test('a body without a length, or with a length past the body limit, counts at the body limit', () => {
  const open = new OpenRequests({
    tenantBodyBytes: 100 * MiB,
    bodyBytes: 100 * MiB,
    bodyLimitBytes: 10 * MiB,
  });
  for (const length of [undefined, '', '-1', '1e9', '12abc', String(10 ** 20), String(50 * MiB)]) {
    const res = response();
    expect(open.open('a', undefined, length, res).ok).toBe(true);
    expect(open.bytes('a')).toBe(10 * MiB);
    res.emit('close');
    expect(open.bytes('a')).toBe(0);
  }
  // A refused request counts nothing and needs no close.
  const small = new OpenRequests({
    tenantBodyBytes: MiB,
    bodyBytes: MiB,
    bodyLimitBytes: 10 * MiB,
  });
  expect(refusal(small.open('a', undefined, undefined, response()))).toMatchObject({
    why: 'tenant_bytes',
  });
  expect(small.bytes()).toBe(0);
});

test('a pipelined response (no socket yet) is counted until its connection closes, once', () => {
  const open = new OpenRequests({
    tenantBodyBytes: 100 * MiB,
    bodyBytes: 100 * MiB,
    bodyLimitBytes: MiB,
  });
  const socket = new EventEmitter();
  const res = Object.assign(response(), { socket: null, req: { socket } });
  expect(open.open('a', 1, '10', res).ok).toBe(true);
  expect(refusal(open.open('a', 1, '10', response()))).toEqual({ why: 'in_flight', cap: 1 });
  socket.emit('close');
  res.emit('close');
  expect(open.bytes()).toBe(0);
  expect(open.open('a', 1, '10', response()).ok).toBe(true);
});

test("a reply waiting for its client counts against its tenant's open bytes, and the edge's, until its response closes", () => {
  const open = new OpenRequests({
    tenantBodyBytes: 4 * MiB,
    bodyBytes: 6 * MiB,
    bodyLimitBytes: MiB,
  });
  const res = response();
  const call = open.open('a', undefined, String(MiB), res);
  if (!call.ok) throw new Error('refused');
  // Up to the tenant's bound with its body; what it counted before is replaced, not added to.
  expect(call.value.holdReply(2 * MiB)).toBe(true);
  expect(call.value.holdReply(3 * MiB)).toBe(true);
  expect(open.bytes('a')).toBe(4 * MiB);
  // Past it: refused, and nothing changed.
  expect(call.value.holdReply(3 * MiB + 1)).toBe(false);
  expect(open.bytes('a')).toBe(4 * MiB);
  expect(refusal(open.open('a', undefined, '10', response()))?.why).toBe('tenant_bytes');
  // The client read some of it: the count goes down, and the tenant opens again.
  expect(call.value.holdReply(MiB)).toBe(true);
  expect(open.open('a', undefined, String(MiB), response()).ok).toBe(true);
  // Another tenant's unread reply meets the edge's bound.
  const b = open.open('b', undefined, '0', response());
  if (!b.ok) throw new Error('refused');
  expect(b.value.holdReply(3 * MiB + 1)).toBe(false);
  expect(b.value.holdReply(2 * MiB)).toBe(true);
  // Its response closes: its body and its reply are let go, and a later count is refused.
  res.emit('close');
  expect(open.bytes('a')).toBe(MiB);
  expect(call.value.holdReply(10)).toBe(false);
  expect(open.bytes()).toBe(3 * MiB);
});
