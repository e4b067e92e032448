import { z } from 'zod';
import { systemEnvelopeFields } from '../envelope.js';

export const ConfigChanged = z.object({
  ...systemEnvelopeFields,
  type: z.literal('config.changed'),
  version: z.int().min(1),
  /** sha256 of the canonical config document. */
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  tenants: z.int().min(0),
  source: z.string().max(200),
});

export type ConfigChanged = z.infer<typeof ConfigChanged>;
