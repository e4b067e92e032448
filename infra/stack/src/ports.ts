import { createServer } from 'node:net';
import { freePort } from '@holdfast/testkit/infra';

/** true when nothing listens on the port (a listen on every address succeeds). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host: '0.0.0.0', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** The usual port when it is free (and wanted), else a free one (and says so). */
export async function usualOrFreePort(
  usual: number,
  anyPort = false,
): Promise<{ port: number; note: string | undefined }> {
  if (anyPort) return { port: await freePort(), note: undefined };
  if (await portIsFree(usual)) return { port: usual, note: undefined };
  const port = await freePort();
  return { port, note: `${usual} is in use, took ${port}` };
}
