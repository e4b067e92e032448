export { startAlerter, type Alerter } from './alerter.js';
export { alerterNames, DEFAULT_SETTINGS, type AlerterSettings } from './env.js';
export { DeliveryLogRecord, DeadLetterRecord } from './webhook/log.js';
