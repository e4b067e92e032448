import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

const VERSION = 0x80;
const HEADER = 1 + 8 + 16; // version, timestamp, IV
const MAC = 32;

/**
 * The `encrypted_content` of the mock's reasoning items: the reasoning a response spent, sealed
 * so that only this mock instance can read it back, as only OpenAI can read its own. The format
 * is Fernet (AES-128-CBC under a random IV, then HMAC-SHA256; urlsafe base64, `gAAAAA...`),
 * what OpenAI's encrypted content looks like, under keys drawn when the mock starts: a gateway
 * cannot decode it, and content from another instance (or altered by a byte) does not verify.
 */
export class ReasoningSeal {
  readonly #signing = randomBytes(16);
  readonly #encryption = randomBytes(16);

  /** The sealed form of `tokens` of reasoning. */
  seal(tokens: number): string {
    const iv = randomBytes(16);
    const time = Buffer.alloc(8);
    time.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 1000)));
    const cipher = createCipheriv('aes-128-cbc', this.#encryption, iv);
    const plain = JSON.stringify({ type: 'reasoning', tokens });
    const body = Buffer.concat([
      Buffer.from([VERSION]),
      time,
      iv,
      cipher.update(plain, 'utf8'),
      cipher.final(),
    ]);
    const token = Buffer.concat([body, this.#mac(body)]).toString('base64');
    return token.replaceAll('+', '-').replaceAll('/', '_');
  }

  /** The reasoning tokens sealed in `content`; undefined when it is not this instance's. */
  open(content: string): number | undefined {
    if (!/^[A-Za-z0-9_-]+={0,2}$/.test(content)) return undefined;
    const raw = Buffer.from(content, 'base64url');
    if (raw.length < HEADER + 16 + MAC || raw[0] !== VERSION) return undefined;
    const body = raw.subarray(0, raw.length - MAC);
    if (!timingSafeEqual(this.#mac(body), raw.subarray(raw.length - MAC))) return undefined;
    try {
      const decipher = createDecipheriv('aes-128-cbc', this.#encryption, body.subarray(9, HEADER));
      const plain = Buffer.concat([decipher.update(body.subarray(HEADER)), decipher.final()]);
      const sealed = JSON.parse(plain.toString('utf8')) as { type?: unknown; tokens?: unknown };
      const { tokens } = sealed;
      return sealed.type === 'reasoning' && Number.isSafeInteger(tokens) && (tokens as number) >= 0
        ? (tokens as number)
        : undefined;
    } catch {
      return undefined;
    }
  }

  #mac(body: Buffer): Buffer {
    return createHmac('sha256', this.#signing).update(body).digest();
  }
}
