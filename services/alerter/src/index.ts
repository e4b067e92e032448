export { startAlerter, type Alerter, type AlerterOptions } from './alerter.js';
export { start, type AlerterDeps } from './service.js';
export {
  alerterNames,
  AlerterEnv,
  DEFAULT_SETTINGS,
  loadConfig,
  type AlerterConfig,
  type AlerterNames,
  type AlerterSettings,
  type WebhookRetryPolicy,
} from './config.js';
export { DeliveryLogRecord, DeadLetterRecord } from './webhook/log.js';
export { signWebhook, webhookBody } from './webhook/sign.js';
export { backoffMs, nextStep, schedule } from './webhook/retry.js';
