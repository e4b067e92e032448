import { Caller } from './loops.js';
import { RunRequest, type RunReply } from './protocol.js';

/**
 * The load generator: its own process, so its CPU is measured apart from the runner that
 * starts the stack and reads its logs. Runs one phase per request from the parent (IPC) and
 * answers with what it measured; exits when the parent disconnects.
 */
const caller = new Caller();
const reply = (r: RunReply) => process.send?.(r);

process.on('message', (raw: unknown) => {
  const req = RunRequest.parse(raw);
  caller.run(req.target, req.load, req.seconds).then(
    (result) => reply({ kind: 'result', id: req.id, result }),
    (err: unknown) => reply({ kind: 'failed', id: req.id, message: String(err) }),
  );
});
process.on('disconnect', () => {
  void caller.close().finally(() => process.exit(0));
});
reply({ kind: 'ready' });
