import { ApiServer } from '../src/server/ApiServer.ts';
import { loadConfig } from '../src/config.ts';
import { Database } from '../src/db/Database.ts';
import { createLogger } from '../src/log.ts';

/**
 * The benchmark's API server, in a process of its own as a deployment runs
 * it (forked by apiBench.ts), so the server and the benchmark's clients do
 * not share one JavaScript thread. Reports its URL over IPC; stops on
 * 'stop' or when the benchmark goes away.
 */
const config = loadConfig();
if (!config.DATABASE_URL) throw new Error('bench/apiServerProcess.ts is started by the benchmark, which sets DATABASE_URL');
const log = createLogger(config.LOG_LEVEL, 'bench-api');
// Keeps its connections, as the service's API server does (Database.open).
const database = Database.fromUrl(config.DATABASE_URL, log, { poolSize: Number(process.env.BENCH_API_POOL ?? 20), keepConnections: true });
const server = await ApiServer.start(database, config, log);
process.send!({ url: server.url });

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await server.stop();
  await database.close();
  process.exit(0);
}
process.on('message', (message) => {
  if (message === 'stop') void stop();
});
process.once('disconnect', () => void stop());
