import { createHash } from 'node:crypto';
import type { ChatPromptRequest } from '../src/types.js';
import { pngDataUrl } from './images.js';

/**
 * Texts chosen to be hard on a token bound: what BPE compresses least (random bytes, emoji,
 * rare scripts, digits, whitespace runs), what a normalizer expands (NFC/NFKC), and text that
 * looks like special tokens. `estimate` must count at least as many tokens as every real
 * tokenizer on each of them, alone and inside chat requests.
 */

/** Deterministic pseudo-random bytes: SHA-256 of `seed:counter`, concatenated. */
function seededBytes(seed: number, length: number): Buffer {
  const chunks: Buffer[] = [];
  for (let i = 0; chunks.length * 32 < length; i++) {
    chunks.push(createHash('sha256').update(`${seed}:${i}`).digest());
  }
  return Buffer.concat(chunks).subarray(0, length);
}

const PROSE =
  'Holdfast reserves the worst case of every call before it reaches the model. When the call ' +
  "ends it settles to the real usage, and it records each decision as an event. It's simple: " +
  'a budget that says 40,000 tokens must never bill 40,001, whatever the concurrency.\n\n';

const TS_CODE = `export async function settle(id: string, usage: Usage): Promise<Result<Settled>> {
  const reply = await nats.request('settle', codec.encode({ id, usage }), { timeout: 2_000 });
  if (!reply.ok) return { ok: false, error: new BaseError({ code: 'settle_failed' }) };
  return { ok: true, value: SettledSchema.parse(codec.decode(reply.data)) };
}
`;

const PY_CODE = `def tokens_per_message(messages: list[dict[str, str]]) -> int:
    total = 0
    for message in messages:
        total += 3
        for key, value in message.items():
            total += len(encoding.encode(value))
            if key == "name":
                total += 1
    return total + 3
`;

const MINIFIED_JS =
  '!function(e,t){"object"==typeof exports&&"undefined"!=typeof module?module.exports=t():' +
  '"function"==typeof define&&define.amd?define(t):(e=e||self).x=t()}(this,function(){"use ' +
  'strict";var e=function(e,t){return e<t?-1:e>t?1:0};return{cmp:e,v:"1.0.0"}});';

export const CORPUS: Record<string, string> = {
  // Framing alone is the tightest case for the chat bound.
  empty: '',
  'one letter': 'a',
  prose: PROSE.repeat(3),
  'code TypeScript': TS_CODE,
  'code Python': PY_CODE,
  'code minified JS': MINIFIED_JS,
  spaces: ' '.repeat(257),
  tabs: '\t'.repeat(129),
  newlines: '\n'.repeat(131),
  'mixed whitespace': ' \t\n \r\n\t\t  \u00a0\u2003\u3000 '.repeat(20),
  'digits long': '31415926535897932384626433832795028841971693993751'.repeat(6),
  'digits grouped': '1 22 333 4444 55555 666666 7777777 '.repeat(8),
  Chinese: '预算必须在并发调用时保持不变，每一次调用都先预留最坏情况。'.repeat(4),
  Japanese: 'お誕生日おめでとう。カタカナとひらがなと漢字を混ぜた文章です。'.repeat(4),
  Korean: '토큰 예산은 동시에 많은 호출이 있어도 유지되어야 합니다.'.repeat(4),
  emoji: '😂👍🤣😍😭🎉🙏😊🔥😁😅🤗😆👏❤️💜💚💗💙🖤'.repeat(4),
  'emoji ZWJ, flags, skin tones': '👩‍👩‍👧‍👦 🧑🏻‍🤝‍🧑🏻 🏴󠁧󠁢󠁥󠁮󠁧󠁿 🇯🇵🇫🇷🇧🇷 👍🏽👋🏿 👨🏻‍❤️‍💋‍👨🏼 🕵‍♂️'.repeat(4),
  Arabic: 'يجب أن تصمد الميزانية أمام العملاء المعادين في كل الأوقات.'.repeat(4),
  Hebrew: 'התקציב חייב להחזיק מעמד מול לקוחות עוינים בכל עת.'.repeat(4),
  Devanagari: 'बजट को हर समय शत्रुतापूर्ण ग्राहकों के विरुद्ध टिकना चाहिए।'.repeat(4),
  Thai: 'งบประมาณต้องคงอยู่เสมอแม้มีลูกค้าที่ไม่เป็นมิตร'.repeat(4),
  cuneiform: '𒀀𒀁𒀂𒀃𒀄𒀅𒀆𒀇𒀈𒀉𒀊𒀋𒀌𒀍𒀎𒀏𒐀𒐁𒐂'.repeat(4),
  'other astral scripts': '𓀀𓀁𓀂 𐌰𐌱𐌲 𝔄𝔅ℭ 𐎀𐎁𐎂 𞤀𞤁𞤂 🀄🃏 𝄞𝄢'.repeat(4),
  'combining marks': 'Z̴̡̛̙a̷͇̓l̸̨̈g̶̱̎ȍ̵͜ e\u0301e\u0300\u0323 '.repeat(6),
  // NFC expands these (composition exclusions and singletons): U+1D160 is 4 bytes, 12 after.
  'NFC expanders': '\u{1D160}\u{1D15E}\uFB2C\u0958\u2126\u212B'.repeat(8),
  // NFKC expands ligatures and compatibility forms: U+FDFA is 3 bytes, 33 after.
  'NFKC expanders': '\uFDFA\uFB03\u3392\u2474\u{1D400}'.repeat(8),
  'special-token lookalikes':
    '<|endoftext|><|im_start|>system<|im_end|><|eot_id|><|begin_of_text|><|start_header_id|>' +
    '<start_of_turn>model<end_of_turn><bos><eos>[INST][/INST]</s><s>[TOOL_CALLS]' +
    '<｜begin▁of▁sentence｜><｜User｜><｜Assistant｜><think></think><tool_call><|fim_prefix|>',
  'lone surrogates': '\ud800a\udc00b\ud83d'.repeat(10),
  mixed: `${PROSE}预算${TS_CODE}😂🏴󠁧󠁢󠁥󠁮󠁧󠁿 𒀀 <|eot_id|> 12345678901234 \t\n`,
};

/** Random bytes decoded as UTF-8 (invalid sequences become U+FFFD), several seeds. */
for (const seed of [1, 2, 3, 4, 5]) {
  CORPUS[`random bytes seed ${seed}`] = seededBytes(seed, 600).toString('utf8');
}
/** Random code points across all planes (no surrogates), one seed. */
CORPUS['random code points'] = [...seededBytes(7, 800)]
  .reduce<number[]>((points, byte, i, all) => {
    if (i % 3 === 2) points.push(((all[i - 2]! << 16) | (all[i - 1]! << 8) | byte) % 0x110000);
    return points;
  }, [])
  .filter((p) => p < 0xd800 || p > 0xdfff)
  .map((p) => String.fromCodePoint(p))
  .join('');

const TOOLS: ChatPromptRequest['tools'] = [
  {
    type: 'function',
    function: {
      name: 'search_flights',
      description: "Find flights between two airports; prices in the traveller's currency.",
      parameters: {
        type: 'object',
        properties: {
          from: { type: 'string', description: 'IATA code, e.g. "OSL"' },
          cabin: { type: 'string', enum: ['economy', 'premium', 'business'] },
          passengers: { type: 'integer', minimum: 1, maximum: 9, default: 1 },
          legs: {
            type: 'array',
            items: { type: 'object', properties: { day: { type: 'number' } } },
          },
        },
        required: ['from'],
      },
    },
  },
  { type: 'function', function: { name: 'ping' } },
];

/**
 * Chat requests built around one sample: plain (system + user), multi-turn with the sample in
 * every role, with tools, a tool call and its result, and with images.
 */
export function chatRequests(text: string): Record<string, ChatPromptRequest> {
  return {
    'system + user': {
      model: 'm',
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: text },
      ],
    },
    'multi-turn': {
      model: 'm',
      messages: [
        { role: 'system', content: text },
        { role: 'user', content: text, name: 'alice' },
        { role: 'assistant', content: text },
        {
          role: 'user',
          content: [
            { type: 'text', text },
            { type: 'text', text: 'and more' },
          ],
        },
      ],
    },
    'tools and a tool call': {
      model: 'm',
      tools: TOOLS,
      tool_choice: 'auto',
      messages: [
        { role: 'user', content: text },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'a1B2c3D4e',
              type: 'function',
              function: {
                name: 'search_flights',
                arguments: JSON.stringify({ from: text.slice(0, 80), legs: [1, 2, 3, 4, 5] }),
              },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'a1B2c3D4e', content: text },
        { role: 'user', content: 'thanks' },
      ],
    },
    images: {
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text },
            { type: 'image_url', image_url: { url: pngDataUrl(512, 512) } },
            { type: 'image_url', image_url: { url: 'https://example.test/a.png', detail: 'low' } },
          ],
        },
      ],
    },
  };
}
