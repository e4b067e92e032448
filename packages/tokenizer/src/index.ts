export * from './types.js';
export {
  TOKENIZER_NAMES,
  encodingForModel,
  isTokenizerName,
  loadTokenizer,
  type EncodingName,
  type Tokenizer,
  type TokenizerName,
} from './tokenizers.js';
export { countChatPrompt } from './chat.js';
export { estimateChatPrompt, ESTIMATE_FRAMING, ESTIMATE_IMAGE_TOKENS } from './estimate.js';
export { textBound } from './bound.js';
export { FAMILY_NAMES, type FamilyName } from './family/index.js';
export { countEmbeddingInput } from './embeddings.js';
export { chatPromptChars, embeddingInputChars } from './size.js';
export { imageTokens, visionCostFor, type VisionCost } from './vision.js';
export { imageSizeFromDataUrl, type ImageSize } from './image-size.js';
export type { CountJob } from './job.js';
export { TokenCounter, DEFAULT_INLINE_MAX_CHARS, type TokenCounterOptions } from './counter.js';
export { REFERENCE_CASES, type ReferenceCase } from './reference-cases.js';
