import { leaseOf, resourceOf } from '../../api/shapes.ts';
import type { LeaseAsk, LeaseService } from '../../client/holdLease.ts';
import { isConnectionFailure } from '../../db/connectionFailure.ts';
import { CommandRejectedError } from '../../domain/errors.ts';
import { findLease, leaseSetUp } from '../../read/leases.ts';
import { countLiveWorkers } from '../../db/liveWorkers.ts';
import { readResourceDetail } from '../../read/resources.ts';
import { later } from '../later.ts';
import type { Session } from '../session.ts';
import { LocalTransport } from './LocalTransport.ts';
import type { LeaseRequest } from './Transport.ts';

const waitForSettled = later(() => import('../../read/waitForSettled.ts'), 'waitForSettled');

/**
 * Holding a lease on the database directly, as the CLI user: `slipway lease
 * run` without SLIPWAY_URL. The same requests, reads and appends as the
 * other local subcommands (LocalTransport), without their progress on stdout.
 */
export class LocalLeaseService implements LeaseService<LeaseRequest> {
  private readonly transport: LocalTransport;

  constructor(
    private readonly session: Session,
    private readonly warn: (line: string) => void,
  ) {
    this.transport = new LocalTransport(session);
  }

  /**
   * The lease is made in one transaction, so no key is needed to make a
   * retry safe, except after a connection lost during its commit; a lease
   * made then and never heard of gets its heartbeat deadline once active and
   * is released when nobody beats it.
   */
  async request(request: LeaseRequest, options: { waitSeconds: number }) {
    const { db, database, config } = this.session;
    if ((await countLiveWorkers(db, config.SLIPWAY_HEARTBEAT_MS)) === 0) {
      this.warn('no live worker: the lease waits until `slipway start` or `slipway worker` runs');
    }
    const { lease, command } = await this.transport.createLease(request);
    const ref = { kind: 'lease', id: lease.id } as const;
    await waitForSettled(database, { rootId: command.id, object: { ref, until: leaseSetUp }, timeoutMs: options.waitSeconds * 1000 });
    return leaseOf(await findLease(db, lease.id));
  }

  read(id: number) {
    return this.transport.showLease(id);
  }

  async readResource(id: number) {
    return resourceOf(await readResourceDetail(this.session.db, id));
  }

  async ask(id: number, { kind, payload, reason }: LeaseAsk): Promise<void> {
    await this.transport.requestCommand({ target: { kind: 'lease', id }, kind, payload, reason });
  }

  isTransient(error: unknown): boolean {
    return isConnectionFailure(error);
  }

  isGone(error: unknown): boolean {
    return error instanceof CommandRejectedError;
  }
}
