import { startNatsCluster, type NatsCluster, serverBinary } from '@holdfast/testkit';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll } from 'vitest';

/**
 * A 3-node JetStream cluster for the file's tests (started before them, stopped after), and
 * connections to it (made by `open`) that are closed with it.
 */
export function natsClusterForFile(
  open: (servers: string) => Promise<NatsConnection> = (servers) => connect({ servers }),
): {
  cluster: () => NatsCluster;
  connect: (servers: string) => Promise<NatsConnection>;
} {
  let cluster: NatsCluster | undefined;
  const conns: NatsConnection[] = [];
  beforeAll(async () => {
    const bin = serverBinary('nats');
    cluster = await startNatsCluster(bin, { nodes: 3 });
  }, 90_000);
  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await cluster?.stop();
  });
  return {
    cluster: () => {
      if (!cluster) throw new Error('the cluster is not started');
      return cluster;
    },
    connect: async (servers) => {
      const nc = await open(servers);
      conns.push(nc);
      return nc;
    },
  };
}
