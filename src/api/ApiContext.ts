import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import type { ProcessHealth } from '../health/ProcessHealth.ts';
import type { AppendBatcher } from '../queue/AppendBatcher.ts';
import type { NoticeListener } from '../read/CommandNotices.ts';
import type { CommandTreeReads } from '../read/CommandTreeReads.ts';
import type { TrustedTokens } from './auth/TrustedTokens.ts';
import type { Backpressure } from './backpressure.ts';

/** What every route plugin works with: one per server process. */
export interface ApiContext {
  readonly database: Database;
  readonly config: Config;
  /** The process's one LISTEN connection, shared by every waiting request. */
  readonly notices: NoticeListener;
  /** The tokens the process trusts for now; its LISTEN connection tells it of revocations. */
  readonly tokens: TrustedTokens;
  readonly backpressure: Backpressure;
  /** The process's long-lived parts (the LISTEN connection; the worker's runner in `slipway start`), for /readyz. */
  readonly health: ProcessHealth;
  /** Sends concurrent requests' plain appends together (see requestCommand). */
  readonly appends: AppendBatcher;
  /** Sends the tree reads of concurrent waiting requests together (see commandAnswers). */
  readonly trees: CommandTreeReads;
  /** Aborted when the server stops: waiting requests answer with what they have. */
  readonly stopping: AbortSignal;
}
