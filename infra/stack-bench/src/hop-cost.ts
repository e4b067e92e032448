import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

/**
 * `pnpm --filter @holdfast/stack-bench bench:hop`: what one message between two Node processes
 * costs on this machine, the floor under every hop of a call (client -> edge -> NATS ->
 * authority -> Redis and back). A ping-pong of 200-byte messages over loopback TCP, one in
 * flight, so each message wakes its receiver as under a light load; CPU from
 * process.cpuUsage() on both sides, per message sent and received.
 */
const ROUND_TRIPS = 20_000;
const MESSAGE = Buffer.alloc(200, 97);

type Usage = NodeJS.CpuUsage;
const micros = (u: Usage) => u.user + u.system;

function echo(): void {
  const server = createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.send!(typeof address === 'object' && address ? address.port : 0);
  });
  process.on('message', (m) => {
    if (m === 'cpu') process.send!(process.cpuUsage());
    if (m === 'exit') process.exit(0);
  });
}

async function pingPong(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['echo']);
  const [port] = (await once(child, 'message')) as [number];
  const socket: Socket = createConnection(port, '127.0.0.1');
  socket.setNoDelay(true);
  await once(socket, 'connect');
  const echoCpu = async () => {
    const reply = once(child, 'message');
    child.send('cpu');
    return ((await reply) as [Usage])[0];
  };
  const echoBefore = await echoCpu();
  const before = process.cpuUsage();
  const started = performance.now();
  await new Promise<void>((done) => {
    let n = 0;
    socket.on('data', () => {
      if (++n >= ROUND_TRIPS) done();
      else socket.write(MESSAGE);
    });
    socket.write(MESSAGE);
  });
  const ms = performance.now() - started;
  const ours = micros(process.cpuUsage(before)) / ROUND_TRIPS;
  const theirs = (micros(await echoCpu()) - micros(echoBefore)) / ROUND_TRIPS;
  socket.destroy();
  child.send('exit');
  process.stdout.write(
    `${ROUND_TRIPS} round trips of ${MESSAGE.length} bytes in ${ms.toFixed(0)} ms ` +
      `(${((ms * 1000) / ROUND_TRIPS).toFixed(1)} µs each); CPU per message sent and received: ` +
      `client ${ours.toFixed(1)} µs, echo ${theirs.toFixed(1)} µs\n`,
  );
}

if (process.argv[2] === 'echo') echo();
else await pingPong();
