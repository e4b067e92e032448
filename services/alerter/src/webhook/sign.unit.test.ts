import { Webhook } from 'standardwebhooks';
import { describe, expect, test } from 'vitest';
import { signWebhook, webhookBody } from './sign.js';

const SECRET = `whsec_${Buffer.from('a test secret of 32 bytes length').toString('base64')}`;
const event = {
  id: '0b6f1a1e-9a43-4c1e-8d52-5d0c7b7c2a11',
  type: 'threshold.crossed',
  time: '2026-12-01T10:00:00.000Z',
  tenant: 'team-a',
  threshold: 0.8,
};

describe('Standard Webhooks signing', () => {
  test('the standardwebhooks verifier accepts our signature and returns the body', () => {
    const req = signWebhook({ secret: SECRET, id: event.id, body: webhookBody(event) });
    expect(req.headers['webhook-id']).toBe(event.id);
    expect(req.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    const verified = new Webhook(SECRET).verify(req.body, req.headers);
    expect(verified).toEqual({ type: 'threshold.crossed', timestamp: event.time, data: event });
  });

  test('a tampered body, id or timestamp, or another secret, is rejected', () => {
    const req = signWebhook({ secret: SECRET, id: event.id, body: webhookBody(event) });
    const verifier = new Webhook(SECRET);
    const tampered = req.body.replace('"threshold":0.8', '"threshold":0.1');
    expect(() => verifier.verify(tampered, req.headers)).toThrow(/signature/i);
    expect(() => verifier.verify(req.body, { ...req.headers, 'webhook-id': 'other' })).toThrow();
    const ts = String(Number(req.headers['webhook-timestamp']) - 1);
    expect(() => verifier.verify(req.body, { ...req.headers, 'webhook-timestamp': ts })).toThrow();
    const other = `whsec_${Buffer.from('another secret, also 32 bytes!!').toString('base64')}`;
    expect(() => new Webhook(other).verify(req.body, req.headers)).toThrow();
  });

  test('a retry keeps the id and signs a fresh timestamp; an old one is refused', () => {
    const body = webhookBody(event);
    const late = signWebhook({
      secret: SECRET,
      id: event.id,
      body,
      now: new Date(Date.now() - 3_600_000),
    });
    expect(() => new Webhook(SECRET).verify(body, late.headers)).toThrow(/timestamp/i);
    const retry = signWebhook({ secret: SECRET, id: event.id, body });
    expect(retry.headers['webhook-id']).toBe(late.headers['webhook-id']);
    expect(new Webhook(SECRET).verify(body, retry.headers)).toBeTruthy();
  });
});
