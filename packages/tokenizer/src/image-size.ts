/**
 * Width and height of a base64 data-URL image (PNG, GIF, JPEG, WebP) read from its header,
 * without decoding pixels. Anything else (an http URL, another format, a truncated header)
 * gives `undefined`, and the caller counts the image pessimistically.
 */
export interface ImageSize {
  width: number;
  height: number;
}

// Enough decoded bytes to pass the EXIF/ICC segments that usually precede a JPEG's frame header.
const MAX_HEADER_BYTES = 256 * 1024;

// A data URL's header ("data:image/png;base64,") is short: its comma is looked for only here,
// not along a URL of megabytes that has none.
const MAX_PREFIX_CHARS = 256;

export function imageSizeFromDataUrl(url: string): ImageSize | undefined {
  const comma = url.slice(0, MAX_PREFIX_CHARS).indexOf(',');
  if (!url.startsWith('data:') || comma < 0 || !url.slice(0, comma).endsWith(';base64')) {
    return undefined;
  }
  const base64Chars = Math.ceil((MAX_HEADER_BYTES * 4) / 3 / 4) * 4;
  const bytes = Buffer.from(url.slice(comma + 1, comma + 1 + base64Chars), 'base64');
  return imageSize(bytes);
}

export function imageSize(b: Buffer): ImageSize | undefined {
  if (
    b.length >= 24 &&
    b.readUInt32BE(0) === 0x89504e47 &&
    b.toString('ascii', 12, 16) === 'IHDR'
  ) {
    return valid(b.readUInt32BE(16), b.readUInt32BE(20));
  }
  if (b.length >= 10 && b.toString('ascii', 0, 3) === 'GIF') {
    return valid(b.readUInt16LE(6), b.readUInt16LE(8));
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) return jpegSize(b);
  if (
    b.length >= 30 &&
    b.toString('ascii', 0, 4) === 'RIFF' &&
    b.toString('ascii', 8, 12) === 'WEBP'
  ) {
    return webpSize(b);
  }
  return undefined;
}

function valid(width: number, height: number): ImageSize | undefined {
  return width > 0 && height > 0 ? { width, height } : undefined;
}

/** Walks the JPEG segments to the first start-of-frame marker (SOF0..SOF15 but DHT/JPG/DAC). */
function jpegSize(b: Buffer): ImageSize | undefined {
  let offset = 2;
  while (offset + 9 < b.length) {
    if (b[offset] !== 0xff) return undefined;
    const marker = b[offset + 1] ?? 0;
    if (marker === 0xff) {
      offset += 1; // fill byte
      continue;
    }
    const isSof = marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker);
    if (isSof) return valid(b.readUInt16BE(offset + 7), b.readUInt16BE(offset + 5));
    offset += 2 + b.readUInt16BE(offset + 2);
  }
  return undefined;
}

function webpSize(b: Buffer): ImageSize | undefined {
  const chunk = b.toString('ascii', 12, 16);
  if (chunk === 'VP8X') return valid(b.readUIntLE(24, 3) + 1, b.readUIntLE(27, 3) + 1);
  if (chunk === 'VP8 ') return valid(b.readUInt16LE(26) & 0x3fff, b.readUInt16LE(28) & 0x3fff);
  if (chunk === 'VP8L') {
    const bits = b.readUInt32LE(21);
    return valid((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1);
  }
  return undefined;
}
