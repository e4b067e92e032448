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

  test("the signature is standardwebhooks' own for the same secret, id, time and body", () => {
    const secrets = [
      SECRET,
      Buffer.from('a bare base64 secret, no prefix!').toString('base64'),
      `whsec_${Buffer.from([0, 255, 1, 254, 2, 253, 3]).toString('base64')}`,
    ];
    const bodies = [webhookBody(event), '', '{"note":"crème brûlée ✓ 𝄞"}', 'x'.repeat(5_000)];
    for (const secret of secrets) {
      for (const body of bodies) {
        const now = new Date(1_764_583_200_123);
        const req = signWebhook({ secret, id: event.id, body, now });
        expect(req.headers['webhook-signature']).toBe(
          new Webhook(secret).sign(event.id, now, body),
        );
        expect(req.headers['webhook-timestamp']).toBe('1764583200');
      }
    }
  });

  test('a secret standardwebhooks cannot read fails the signing as it does', () => {
    for (const secret of ['', 'whsec_', 'whsec_not base64!']) {
      expect(() => new Webhook(secret)).toThrow();
      expect(() => signWebhook({ secret, id: event.id, body: '{}' })).toThrow();
    }
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
