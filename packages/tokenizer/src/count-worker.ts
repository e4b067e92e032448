import { parentPort } from 'node:worker_threads';
import {
  countWith,
  type CountJob,
  type WorkerCounting,
  type WorkerReply,
  type WorkerRequest,
} from './job.js';
import { loadTokenizer } from './tokenizers.js';

/** Worker-thread entry of the count pool: counts each job it is posted and replies by id. */
const port = parentPort;
if (!port) throw new Error('count-worker runs only as a worker thread');

port.on('message', ({ id, job }: WorkerRequest) => void answer(id, job));

async function answer(id: number, job: CountJob): Promise<void> {
  try {
    const tokenizer = await loadTokenizer(job.tokenizer);
    // The pool's time limit runs from here: this thread's boot and the tokenizer's load (each
    // over a second on a loaded box) are not the count's.
    port!.postMessage({ id, counting: true } satisfies WorkerCounting);
    port!.postMessage({ id, ok: true, tokens: countWith(job, tokenizer) } satisfies WorkerReply);
  } catch (err) {
    port!.postMessage({
      id,
      ok: false,
      message: err instanceof Error ? err.message : String(err),
    } satisfies WorkerReply);
  }
}
