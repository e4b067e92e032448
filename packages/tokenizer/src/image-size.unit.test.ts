import { describe, expect, it } from 'vitest';
import { gif, jpeg, png, webpVp8x } from '../test/images.js';
import { imageSize, imageSizeFromDataUrl } from './image-size.js';

describe('imageSize', () => {
  it.each([
    ['png', png(1920, 1080)],
    ['gif', gif(1920, 1080)],
    ['jpeg', jpeg(1920, 1080)],
    ['webp', webpVp8x(1920, 1080)],
  ])('reads %s headers', (_format, bytes) => {
    expect(imageSize(bytes)).toEqual({ width: 1920, height: 1080 });
  });

  it('returns undefined for unknown, truncated or zero-sized images', () => {
    expect(imageSize(Buffer.from('not an image at all, just text'))).toBeUndefined();
    expect(imageSize(png(1920, 1080).subarray(0, 20))).toBeUndefined();
    expect(imageSize(png(0, 10))).toBeUndefined();
    expect(imageSize(jpeg(1, 1).subarray(0, 12))).toBeUndefined();
  });
});

describe('imageSizeFromDataUrl', () => {
  it('decodes base64 data URLs only', () => {
    const url = `data:image/jpeg;base64,${jpeg(800, 600).toString('base64')}`;
    expect(imageSizeFromDataUrl(url)).toEqual({ width: 800, height: 600 });
    expect(imageSizeFromDataUrl('https://example.test/a.png')).toBeUndefined();
    expect(imageSizeFromDataUrl('data:image/png,rawbytes')).toBeUndefined();
  });
});
