/**
 * The raw baseline the authority is judged against: the same transport and the same kind of
 * atomic step with none of Holdfast around it. A responder that answers NATS requests by
 * echoing them, and one that runs a bare 3-window check-and-reserve Lua (the reference
 * design's script) and replies.
 */
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';

export const RAW_LUA = `
local reserved = tonumber(ARGV[1])
local limit = 1000000000000
for i = 1, 3 do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  if used + reserved > limit then return {'err', i} end
end
for i = 1, 3 do redis.call('INCRBY', KEYS[i], reserved) end
return {'ok'}`;

export const rawKeys = (prefix: string) => [`${prefix}:m`, `${prefix}:d`, `${prefix}:mo`];

async function main(): Promise<void> {
  const [natsUrl, redisUrl, subject, prefix] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
  ];
  const nc = await connect({ servers: natsUrl });
  const redis = new Redis(redisUrl);
  const sha = (await redis.script('LOAD', RAW_LUA)) as string;
  const keys = rawKeys(prefix);
  nc.subscribe(`${subject}.echo`, {
    queue: 'raw',
    callback: (_e, m) => {
      m.respond(m.data);
    },
  });
  nc.subscribe(`${subject}.lua`, {
    queue: 'raw',
    callback: (_e, m) => {
      void redis.evalsha(sha, 3, ...keys, '1394').then(() => {
        m.respond(m.data);
      });
    },
  });
  await nc.flush();
  process.stdout.write('ready\n');
}

if (process.argv[1]?.endsWith('raw.ts')) void main();
