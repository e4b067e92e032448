import { imageSizeFromDataUrl, type ImageSize } from './image-size.js';

/**
 * Image input cost, from OpenAI's "Images and vision → Calculating costs" guide. Two schemes:
 * - tiles: `detail: low` costs `base`; otherwise the image is scaled to fit 2048x2048, then its
 *   shortest side to 768, and each 512px tile costs `tile` on top of `base`;
 * - patches (the mini/nano generations): 32px patches, at most 1536, times a multiplier; `detail`
 *   does not change it.
 * Where the size is not known (an http URL) the count is the worst case for the model, so a
 * reservation never undercounts an image. When OpenAI lists several values for a family the
 * higher one is used (e.g. GPT-5 is counted with the 4o rates).
 */
export type VisionCost =
  | { kind: 'tiles'; base: number; tile: number }
  | { kind: 'patches'; multiplier: number }
  | { kind: 'pixels' };

/**
 * Claude (Anthropic's "Vision" guide): width x height / 750 tokens, after the image is scaled
 * down to a long edge of at most 1,568 px. The largest image it keeps unscaled, 784 x 1,568 (its
 * 1:2 row), is 1,639.08 tokens, above the "about 1,600" the guide rounds to: so no Claude image
 * costs more than 1,640, and one of unknown size costs that.
 */
const CLAUDE_MAX_EDGE = 1568;
const CLAUDE_PIXELS_PER_TOKEN = 750;
const CLAUDE_MAX_IMAGE_TOKENS = 1640;

const TILES_4O: VisionCost = { kind: 'tiles', base: 85, tile: 170 };

const VISION_COSTS: readonly (readonly [RegExp, VisionCost])[] = [
  [/^gpt-4o-mini/, { kind: 'tiles', base: 2833, tile: 5667 }],
  [/^(gpt-4\.1-mini|gpt-5-mini)/, { kind: 'patches', multiplier: 1.62 }],
  [/^(gpt-4\.1-nano|gpt-5-nano)/, { kind: 'patches', multiplier: 2.46 }],
  [/^o4-mini/, { kind: 'patches', multiplier: 1.72 }],
  [/^(o1|o3)(?!-mini)/, { kind: 'tiles', base: 75, tile: 150 }],
  [/^claude/, { kind: 'pixels' }],
];

const MAX_PATCHES = 1536;
const PATCH = 32;
const TILE = 512;
// A scaled side that lands on a whole number of tiles/patches must not round up to one more.
const EPSILON = 1e-9;

export function visionCostFor(model: string): VisionCost {
  const m = model.toLowerCase();
  return VISION_COSTS.find(([pattern]) => pattern.test(m))?.[1] ?? TILES_4O;
}

/** Prompt tokens of one `image_url` part for a model. */
export function imageTokens(model: string, url: string, detail?: string | null): number {
  const cost = visionCostFor(model);
  return imageTokensFor(cost, imageSizeFromDataUrl(url), detail ?? 'auto');
}

export function imageTokensFor(
  cost: VisionCost,
  size: ImageSize | undefined,
  detail: string,
): number {
  if (cost.kind === 'pixels') return size ? claudeImageTokens(size) : CLAUDE_MAX_IMAGE_TOKENS;
  if (cost.kind === 'patches') {
    const patches = size ? patchCount(size) : MAX_PATCHES;
    return Math.ceil(patches * cost.multiplier);
  }
  if (detail === 'low') return cost.base;
  // Unknown size: the most tiles a 2048x768 box can need (4 x 2).
  const tiles = size ? tileCount(size) : 8;
  return cost.base + cost.tile * tiles;
}

export function claudeImageTokens({ width, height }: ImageSize): number {
  const s = Math.min(1, CLAUDE_MAX_EDGE / Math.max(width, height));
  const tokens = Math.ceil((width * s * height * s) / CLAUDE_PIXELS_PER_TOKEN - EPSILON);
  return Math.min(CLAUDE_MAX_IMAGE_TOKENS, tokens);
}

export function tileCount({ width, height }: ImageSize): number {
  let w = width;
  let h = height;
  if (Math.max(w, h) > 2048) {
    const s = 2048 / Math.max(w, h);
    w *= s;
    h *= s;
  }
  if (Math.min(w, h) > 768) {
    const s = 768 / Math.min(w, h);
    w *= s;
    h *= s;
  }
  return ceil(w / TILE) * ceil(h / TILE);
}

export function patchCount({ width, height }: ImageSize): number {
  const raw = ceil(width / PATCH) * ceil(height / PATCH);
  if (raw <= MAX_PATCHES) return raw;
  let s = Math.sqrt((PATCH * PATCH * MAX_PATCHES) / (width * height));
  // Shrink a little more so that one side fits a whole number of patches.
  s *= Math.min(
    Math.floor((width * s) / PATCH) / ((width * s) / PATCH),
    Math.floor((height * s) / PATCH) / ((height * s) / PATCH),
  );
  return Math.min(MAX_PATCHES, ceil((width * s) / PATCH) * ceil((height * s) / PATCH));
}

function ceil(x: number): number {
  return Math.ceil(x - EPSILON);
}
