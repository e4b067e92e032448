import { parentPort } from 'node:worker_threads';
import { runJob, type WorkerReady, type WorkerReply, type WorkerRequest } from './job.js';

/** Worker-thread entry of the count pool: counts each job it is posted and replies by id. */
const port = parentPort;
if (!port) throw new Error('count-worker runs only as a worker thread');

port.on('message', ({ id, job }: WorkerRequest) => {
  runJob(job).then(
    (tokens) => port.postMessage({ id, ok: true, tokens } satisfies WorkerReply),
    (err: unknown) =>
      port.postMessage({
        id,
        ok: false,
        message: err instanceof Error ? err.message : String(err),
      } satisfies WorkerReply),
  );
});
port.postMessage({ ready: true } satisfies WorkerReady);
