import { EnvError } from '@holdfast/config';
import { namesWithPrefix } from '@holdfast/events';
import { describe, expect, test } from 'vitest';
import { alerterNames, loadConfig } from './env.js';

describe('alerter environment', () => {
  test('defaults: ops port 9103, retries for 6 hours', () => {
    const config = loadConfig({});
    expect(config.opsPort).toBe(9103);
    expect(config.settings.retry).toEqual({
      initialMs: 2_000,
      maxMs: 600_000,
      retryForMs: 21_600_000,
    });
    // Events in bursts by default, far inside the 5 s an alert is due in; 0 is consume().
    expect(config.settings.pullEveryMs).toBe(250);
    expect(loadConfig({ ALERTER_PULL_EVERY_MS: '0' }).settings.pullEveryMs).toBe(0);
  });

  test('errors name the variable', () => {
    expect(() => loadConfig({ ALERTER_OPS_PORT: 'x' })).toThrow(EnvError);
    expect(() =>
      loadConfig({
        ALERTER_WEBHOOK_RETRY_INITIAL_MS: '5000',
        ALERTER_WEBHOOK_RETRY_MAX_MS: '1000',
      }),
    ).toThrow(/ALERTER_WEBHOOK_RETRY_INITIAL_MS/);
  });

  test("the alerter's NATS names derive from the events names", () => {
    expect(alerterNames(namesWithPrefix('t1a2b'))).toEqual({
      stateBucket: 'T1A2B_ALERTER',
      webhookStream: 'T1A2B_WEBHOOK_JOBS',
      webhookSubjectPrefix: 't1a2b.webhooks.jobs',
      legacyWebhookStream: 'T1A2B_WEBHOOKS',
      legacyWebhookSubjectPrefix: 't1a2b.webhooks.queue',
      logStream: 'T1A2B_WEBHOOK_LOG',
      logSubjectPrefix: 't1a2b.webhooks.log',
      deadSubjectPrefix: 't1a2b.webhooks.dead',
    });
  });
});
