// A process that commits one command (its wake-up row with it, in the same
// statement) and is SIGKILLed before it can send the wake-up signal: the
// window between a command's commit and its NOTIFY. Arguments: the database
// URL and the lease to release.
import { Database } from '../../../src/db/Database.ts';
import { appendStatement } from '../../../src/queue/appendCommand.ts';
import { createLogger } from '../../../src/log.ts';

const [url, leaseId] = process.argv.slice(2);
const database = Database.fromUrl(url!, createLogger('warn', 'append-then-die'), { poolSize: 1 });
await database.db.executeQuery(
  appendStatement(
    { target: { kind: 'lease', id: Number(leaseId) }, kind: 'release', actor: { issuedBy: 'dying', source: 'cli' } },
    { fromOutside: true },
  ),
);
process.kill(process.pid, 'SIGKILL');
