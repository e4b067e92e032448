import { HoldfastEvent } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { expect } from 'vitest';
import type { SqlExecutor } from '../src/clickhouse.js';
import { migrate } from '../src/migrate.js';
import { toEventRow } from '../src/rows.js';
import { qualified, sql } from '../src/sql.js';
import { settledCall } from './events.js';

/**
 * Migration 015, run on ClickHouse 18.16 and on current ClickHouse: a settlement's audio
 * prompt and completion tokens reach their columns next to what the authority charged for
 * them, an event from before audio prices reads 0, and the migration runs again unchanged.
 */
export async function runAudioContract(ch: SqlExecutor, database: string): Promise<void> {
  const logger = createLogger({ name: 'test', level: 'silent' });
  await migrate({ ch, database, logger });
  const t = qualified(database, 'events_raw_v1');
  const at = Date.UTC(2026, 11, 2, 8, 0);
  const [, voice] = settledCall({
    tenant: 'voice',
    atMs: at,
    prompt: 1_000,
    completion: 400,
    parts: { cached: 100, audioPrompt: 200, audioCompletion: 300 },
  });
  const audio = HoldfastEvent.parse({ ...voice, costMicroUsd: 34_875, chargedMicroUsd: 34_875 });
  const [, text] = settledCall({ tenant: 'voice', atMs: at + 1_000 });
  const { audioPromptTokens: _a, audioCompletionTokens: _c, ...old } = text;
  await ch.insert(t, [toEventRow(audio, 1), toEventRow(HoldfastEvent.parse(old), 2)]);
  // An interrupted or repeated migration: the columns are there already, nothing fails.
  await migrate({ ch, database, logger });

  const rows = await ch.query<Record<string, number | string>>(
    sql`SELECT prompt_tokens, cached_prompt_tokens, audio_prompt_tokens, completion_tokens, audio_completion_tokens, cost_micro_usd FROM ${t} FINAL ORDER BY time_ms`,
  );
  expect(rows.map((r) => Object.values(r).map(Number))).toEqual([
    [1_000, 100, 200, 400, 300, 34_875],
    [370, 0, 0, 512, 0, 882],
  ]);
}
