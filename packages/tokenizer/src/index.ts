export * from './types.js';
export {
  encodingForModel,
  loadTokenizer,
  type Tokenizer,
  type TokenizerName,
} from './tokenizers.js';
export { countChatPrompt } from './chat.js';
export { FAMILY_NAMES } from './family/index.js';
export { countEmbeddingInput } from './embeddings.js';
export { imageSizeFromDataUrl } from './image-size.js';
export { TokenCounter, type CountOwner } from './counter.js';
export { CountQueueFull } from './pool.js';
export { REFERENCE_CASES } from './reference-cases.js';
