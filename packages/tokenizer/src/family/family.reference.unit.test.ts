import { beforeAll, describe, expect, it } from 'vitest';
import { FAMILY_NAMES, loadFamily, type FamilyName } from './index.js';
import type { FamilyCounter } from './family.js';

/**
 * The family counters against token ids published by projects that tokenize with the models'
 * own tokenizers. Each block names its source; the ids are reference data, not our output.
 */

const f = {} as Record<FamilyName, FamilyCounter>;
beforeAll(() => {
  for (const name of FAMILY_NAMES) f[name] = loadFamily(name);
}, 60_000);

// Source: huggingface/transformers.js, packages/transformers/tests/models/llama/
// test_tokenization_llama.js, "Xenova/llama3-tokenizer-new" (the Llama 3 tokenizer with BOS);
// the leading BOS (128000) is left out since countText adds none.
const LLAMA3 = [
  ['How are you doing?', [4438, 527, 499, 3815, 30]],
  ['生活的真谛是', [104654, 9554, 89151, 39013, 249, 21043]],
  ['def main():\n\tpass', [755, 1925, 4019, 42531]],
  ['you…\u00a0\u00a0', [9514, 1981, 9421]],
  [
    '0123456789 0 1 2 3 4 5 6 7 8 9 10 100 1000',
    [
      11531, 12901, 17458, 24, 220, 15, 220, 16, 220, 17, 220, 18, 220, 19, 220, 20, 220, 21, 220,
      22, 220, 23, 220, 24, 220, 605, 220, 1041, 220, 1041, 15,
    ],
  ],
] as const;

// Source: same repository, models/qwen2/test_tokenization_qwen2.js, "Xenova/Qwen1.5-0.5B-Chat"
// (Qwen 1.5, 2, 2.5 and 3 share the byte-level BPE vocabulary and its NFC normalizer).
const QWEN = [
  ['How are you doing?', [4340, 525, 498, 3730, 30]],
  ['生活的真谛是', [105301, 88051, 116109, 20412]],
  ['def main():\n\tpass', [750, 1887, 3932, 41431]],
  [
    'test $1 R2 #3 €4 £5 ¥6 ₣7 ₹8 ₱9 test',
    [
      1944, 400, 16, 431, 17, 671, 18, 12984, 19, 6938, 20, 71488, 21, 2858, 224, 96, 22, 89791, 23,
      2858, 224, 109, 24, 1273,
    ],
  ],
] as const;

// Source: ml-rust/splintr, tests/deepseek_v3.rs ("Exact Token ID Tests").
const DEEPSEEK_V3 = [
  ['Hello world', [19923, 2058]],
  [' hello world ', [44388, 2058, 223]],
  ['你好世界', [30594, 3427]],
  ['Hello 你好 World 世界!', [19923, 223, 30594, 4495, 223, 3427, 3]],
  ['Hello 🌍 World!', [19923, 73369, 238, 4495, 3]],
] as const;

// Source: the tests of tekken-rs (a Rust port of mistral-common's Tekkenizer, 131,072-token
// tekken.json), encode(text, bos=false, eos=false).
const TEKKEN = [
  ['Hello, world!', [22177, 1044, 4304, 1033]],
  [
    'The quick brown fox jumps over the lazy dog.',
    [1784, 7586, 22980, 94137, 72993, 2136, 1278, 42757, 10575, 1046],
  ],
  ['   whitespace   handling   ', [1256, 81024, 1256, 21490, 1293]],
  [
    'This is a test of the Mistral Tekken tokenizer.',
    [4380, 1395, 1261, 2688, 1307, 1278, 42301, 2784, 47213, 3569, 128405, 1046],
  ],
] as const;

describe('plain text ids', () => {
  it.each([
    ...LLAMA3.map(([text, ids]) => ['llama3', text, ids] as const),
    ...LLAMA3.map(([text, ids]) => ['llama3_2', text, ids] as const),
    ...QWEN.map(([text, ids]) => ['qwen3', text, ids] as const),
    ...QWEN.map(([text, ids]) => ['qwen2_5', text, ids] as const),
    ...DEEPSEEK_V3.map(([text, ids]) => ['deepseek_v3', text, ids] as const),
    ...TEKKEN.map(([text, ids]) => ['mistral_nemo', text, ids] as const),
  ])('%s %j', (family, text, ids) => {
    expect(f[family].vocab.encodeParsed(text)).toEqual(ids);
    expect(f[family].countText(text)).toBe(ids.length);
  });

  it('counts the transformers.js Llama 3 paragraph (emoji, IPA, digits) as 371 tokens', () => {
    // Same source, LLAMA_TEST_STRINGS.PARAGRAPH: 372 ids with the BOS.
    const paragraph =
      'The llama (/ˈlɑːmə/; 🦙Spanish pronunciation: [ˈʎama]) (Lama glama) is a domesticated South American camelid, widely used as a meat and pack animal by Andean cultures since the Pre-Columbian era. Llamas are social animals and live with others as a herd. Their wool is soft and contains only a small amount of lanolin.[2] Llamas can learn simple tasks after a few repetitions. When using a pack, they can carry about 25 to 30% of their body weight for 8 to 13 km (5–8 miles).[3] The name llama (in the past also spelled "lama" or "glama") was adopted by European settlers from native Peruvians.[4] The ancestors of llamas are thought to have originated from the Great Plains of North America about 40 million years ago, and subsequently migrated to South America about three million years ago during the Great American Interchange. By the end of the last ice age (10,000–12,000 years ago), camelids were extinct in North America.[3] As of 2007, there were over seven million llamas and alpacas in South America and over 158,000 llamas and 100,000Ꙋ🦙 alpacas, descended from progenitors imported late in the 20th century, in the United States and Canada.[5] In Aymara mythology, llamas are important beings. The Heavenly Llama is said to drink water from the ocean and urinates as it rains.[6] According to Aymara eschatology, llamas will return to the water springs and lagoons where they come from at the end of time.[6]';
    expect(f.llama3.countText(paragraph)).toBe(371);
  });
});

describe('chat templates', () => {
  // Source: huggingface/transformers.js, packages/transformers/tests/tokenizers.test.js, "should
  // support default parameters" (Xenova/Meta-Llama-3.1-Tokenizer, adapted from Meta's model
  // card): apply_chat_template without and with tools, no generation prompt.
  const chat = [
    { role: 'system', content: 'You are a bot that responds to weather queries.' },
    { role: 'user', content: "Hey, what's the temperature in Paris right now?" },
  ];
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_current_temperature',
        description: 'Get the current temperature at a location.',
        parameters: {
          type: 'object',
          properties: {
            location: {
              type: 'string',
              description: 'The location to get the temperature for, in the format "City, Country"',
            },
          },
          required: ['location'],
        },
        return: {
          type: 'number',
          description:
            'The current temperature at the specified location in the specified units, as a float.',
        },
      },
    },
  ];
  const LLAMA3_1_IDS = [
    128000, 128006, 9125, 128007, 271, 38766, 1303, 33025, 2696, 25, 6790, 220, 2366, 18, 198,
    15724, 2696, 25, 220, 1627, 10263, 220, 2366, 19, 271, 2675, 527, 264, 11164, 430, 31680, 311,
    9282, 20126, 13, 128009, 128006, 882, 128007, 271, 19182, 11, 1148, 596, 279, 9499, 304, 12366,
    1314, 1457, 30, 128009,
  ];

  it('llama3_1: the ids of Meta’s example, and 249 with its tool', () => {
    const plain = f.llama3_1.render({ model: 'm', messages: chat }, false);
    expect(f.llama3_1.vocab.encodeParsed(plain)).toEqual(LLAMA3_1_IDS);
    const withTools = f.llama3_1.render({ model: 'm', messages: chat, tools }, false);
    const ids = f.llama3_1.vocab.encodeParsed(withTools);
    expect(ids).toHaveLength(249);
    expect(ids.slice(-5)).toEqual([12366, 1314, 1457, 30, 128009]);
    // With the generation prompt: <|start_header_id|>assistant<|end_header_id|>\n\n.
    expect(f.llama3_1.countChat({ model: 'm', messages: chat })).toBe(52 + 4);
  });

  it('llama3_2: the same template dated today', () => {
    const rendered = f.llama3_2.render({ model: 'm', messages: chat }, false);
    const today = new Date()
      .toLocaleDateString('en-GB', { day: '2-digit', month: 'short', year: 'numeric' })
      .replace('Sept', 'Sep');
    expect(rendered).toContain(`Today Date: ${today}\n`);
    expect(rendered.replace(today, '26 Jul 2024')).toBe(
      f.llama3_1.render({ model: 'm', messages: chat }, false),
    );
  });

  it('gemma3: the prompt ids ollama feeds gemma-3-4b-it', () => {
    // Source: ollama's TestGemma3 (its comment says "Why is the sky blue"; id 36425 is "why"):
    // <bos><start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model, the rendered prompt
    // minus its last "\n".
    const rendered = f.gemma3.render({
      model: 'm',
      messages: [{ role: 'user', content: 'why is the sky blue' }],
    });
    expect(rendered.endsWith('<start_of_turn>model\n')).toBe(true);
    expect(f.gemma3.vocab.encodeParsed(rendered.slice(0, -1))).toEqual([
      2, 105, 2364, 107, 36425, 563, 506, 7217, 3730, 106, 107, 105, 4368,
    ]);
  });
});
