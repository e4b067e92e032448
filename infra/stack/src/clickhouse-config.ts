/**
 * A minimal clickhouse-server config for a data dir of our own: HTTP and native ports on
 * loopback, logs in files (warnings and up), one passwordless `default` user. The `yandex`
 * root element is what 18.16 (Debian) needs; newer servers still accept it.
 */
export function clickhouseServerConfig(o: {
  dir: string;
  host: string;
  httpPort: number;
  tcpPort: number;
}): string {
  return `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>${o.dir}/log/server.log</log>
    <errorlog>${o.dir}/log/error.log</errorlog>
    <size>50M</size>
    <count>2</count>
  </logger>
  <listen_host>${o.host}</listen_host>
  <http_port>${o.httpPort}</http_port>
  <tcp_port>${o.tcpPort}</tcp_port>
  <path>${o.dir}/data/</path>
  <tmp_path>${o.dir}/tmp/</tmp_path>
  <user_files_path>${o.dir}/user_files/</user_files_path>
  <format_schema_path>${o.dir}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
`;
}

export const CLICKHOUSE_USERS_XML = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default><max_memory_usage>4000000000</max_memory_usage></default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries>
        <errors>0</errors>
        <result_rows>0</result_rows>
        <read_rows>0</read_rows>
        <execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
`;
