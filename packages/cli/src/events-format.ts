import { formatUsd } from '@holdfast/events';

/**
 * One readable line per event for `holdfast events`, from the event as it is on the stream
 * (a plain object: a type this CLI does not know yet still prints, with its scalar fields).
 */

type Raw = Record<string, unknown>;

const num = (v: unknown) => (typeof v === 'number' ? v : 0);
const str = (v: unknown) => (typeof v === 'string' ? v : '');
const n = (v: unknown) => num(v).toLocaleString('en-US');

interface Window {
  budget: string;
  tenant: string;
  unit: string;
  used: number;
  held: number;
  limit: number;
}

function windows(e: Raw): string {
  if (!Array.isArray(e.windows) || e.windows.length === 0) return '';
  const shown = (e.windows as Window[]).map((w) => {
    const amount = (x: number) => (w.unit === 'usd' ? formatUsd(x) : n(x));
    const level = w.tenant === e.tenant ? '' : `${w.tenant}/`;
    const held = w.held > 0 ? ` +${amount(w.held)} held` : '';
    return `${level}${w.budget} ${amount(w.used)}${held} of ${amount(w.limit)}`;
  });
  return `  [${shown.join('; ')}]`;
}

const reservation = (e: Raw) =>
  `res ${str(e.reservationId).slice(0, 8)} ${e.keyId ? `key ${str(e.keyId)} ` : ''}${str(e.useCase)} ${str(e.model)}`;

/** What happened, in the event's own figures. */
function what(e: Raw): string {
  switch (e.type) {
    case 'reservation.created':
      return `${reservation(e)}: held ${n(e.heldTokens)} tokens / ${formatUsd(num(e.heldMicroUsd))} (prompt ${n(e.promptTokens)}, max_tokens ${n(e.maxTokens)}${e.maxTokens !== e.requestedMaxTokens ? ` of ${n(e.requestedMaxTokens)} asked` : ''})`;
    case 'reservation.extended':
      return `${reservation(e)}: hold grew by ${n(e.addedTokens)} tokens to ${n(e.heldTokens)}`;
    case 'reservation.settled':
      return `${reservation(e)}: billed ${n(e.billedTokens)} tokens (${n(e.promptTokens)} prompt + ${n(e.completionTokens)} completion), ${formatUsd(num(e.costMicroUsd))}, ${str(e.outcome)} in ${n(e.durationMs)} ms`;
    case 'reservation.released':
      return `${reservation(e)}: released ${n(e.heldTokens)} tokens (${str(e.reason)})`;
    case 'reservation.expired':
      return `${reservation(e)}: hold of ${n(e.heldTokens)} tokens expired after ${n(e.leaseMs)} ms`;
    case 'reservation.moved': {
      const from = str(e.fromUpstream);
      const billed =
        e.fromUsedTokens === undefined ? '' : `, ${n(e.fromUsedTokens)} billed on ${from}`;
      return `res ${str(e.reservationId).slice(0, 8)} ${str(e.model)}: moved to upstream ${str(e.upstream)}${from ? ` from ${from}` : ''} (${n(e.tokens)} tokens taken there${billed})`;
    }
    case 'reservation.retried':
      return `res ${str(e.reservationId).slice(0, 8)} ${str(e.model)}: a retry took a request of upstream ${str(e.upstream)}`;
    case 'admission.refused':
      return `${e.shadow === true ? 'shadow budget would refuse (admitted): ' : ''}${str(e.code)}: ${str(e.message)}`;
    case 'threshold.crossed':
      return `${str(e.level)} ${str(e.budget)} crossed ${Math.round(num(e.threshold) * 100)}% (${n(e.used)} of ${n(e.limit)})`;
    case 'tenant.suspended':
      return `suspended by ${str(e.by)}: ${str(e.reason)}${num(e.graceMs) > 0 ? ` (grace ${n(e.graceMs)} ms)` : ''}`;
    case 'tenant.resumed':
      return `resumed (${str(e.by)})`;
    case 'budget.exhaustion_projected':
      return `${str(e.level)} ${str(e.budget)} runs out at ${str(e.projectedExhaustionAt)}`;
    case 'config.changed':
      return `config version ${n(e.version)} (${n(e.tenants)} tenants) from ${str(e.source)}`;
    default: {
      const skip = new Set(['id', 'schemaVersion', 'time', 'tenant', 'org', 'type', 'windows']);
      return Object.entries(e)
        .filter(([k, v]) => !skip.has(k) && v !== null && typeof v !== 'object')
        .map(([k, v]) => `${k}=${String(v as string | number | boolean)}`)
        .join(' ');
    }
  }
}

/** `12:00:01.123Z #42 support-bot reservation.settled res 1a2b3c4d ...  [month-tokens ...]` */
export function eventLine(seq: number, e: Raw): string {
  return `${str(e.time)} #${seq} ${str(e.tenant)} ${str(e.type)} ${what(e)}${windows(e)}`;
}
