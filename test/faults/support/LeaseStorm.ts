import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiAnswer, ApiClient } from '../../api/support/ApiClient.ts';

/** A command the API acknowledged (2xx), and when the answer came. */
export interface Acknowledged {
  readonly commandId: number;
  readonly leaseId: number;
  readonly kind: 'create' | 'release';
  readonly at: number;
}

/** One answer, as a client saw it. */
export interface Answered {
  readonly status: number;
  readonly at: number;
  readonly mayHaveCommitted?: boolean;
}

/** How long a client waits before sending a request again after a 503: less than its Retry-After, so the storm sees the first moment the service answers again. */
const RETRY_MS = 200;

/**
 * API clients creating and releasing leases in a loop, spread over several
 * API servers, every request sent with an Idempotency-Key and sent again
 * with the same key while it is answered 503. Half of them wait for their
 * commands (`?wait`), so some waits are cut off by an outage; the others
 * hold each lease a moment first. It records every answer, every
 * acknowledged command and anything a client should never see.
 */
export class LeaseStorm {
  readonly acknowledged: Acknowledged[] = [];
  readonly leases: number[] = [];
  readonly answers: Answered[] = [];
  /** Answers a client should never get: 5xx other than 503, a 4xx, a 503 without Retry-After, a request that failed. */
  readonly unexpected: string[] = [];
  private stopped = false;
  private readonly loops: Promise<void>[] = [];

  constructor(
    private readonly servers: readonly ApiClient[],
    private readonly blueprint: string,
    private readonly waitSeconds = 5,
  ) {}

  start(clients: number): void {
    for (let i = 0; i < clients; i++) this.loops.push(this.loop(this.servers[i % this.servers.length]!, i % 2 === 0));
  }

  /** Lets every client finish the lease it is on, then returns. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  get releases(): number {
    return this.acknowledged.filter((a) => a.kind === 'release').length;
  }

  private async loop(server: ApiClient, waits: boolean): Promise<void> {
    const wait = waits ? `?wait=${this.waitSeconds}` : '';
    while (!this.stopped) {
      const created = await this.untilServed(server, `/v1/leases${wait}`, { blueprint: this.blueprint });
      if (!created) return;
      const leaseId = created.body.lease.id as number;
      this.leases.push(leaseId);
      this.acknowledged.push({ commandId: created.body.command.id, leaseId, kind: 'create', at: Date.now() });
      if (!waits) await sleep(Math.random() * 300);
      const released = await this.untilServed(server, `/v1/leases/${leaseId}/commands${wait}`, { kind: 'release' });
      if (!released) return;
      this.acknowledged.push({ commandId: released.body.command.id, leaseId, kind: 'release', at: Date.now() });
    }
  }

  /** The answer once it is a success; undefined (the client gives up, having recorded why) on a 4xx. */
  private async untilServed(server: ApiClient, url: string, body: unknown): Promise<ApiAnswer | undefined> {
    const key = randomUUID();
    for (;;) {
      let answer: ApiAnswer;
      try {
        answer = await server.post(url, body, { headers: { 'idempotency-key': key } });
      } catch (error) {
        this.unexpected.push(`${url}: ${String(error)}`);
        await sleep(RETRY_MS);
        continue;
      }
      this.answers.push({ status: answer.status, at: Date.now(), mayHaveCommitted: answer.body?.error?.details?.mayHaveCommitted });
      if ([200, 201, 202].includes(answer.status)) return answer;
      if (answer.status === 503) {
        if (answer.headers.get('retry-after') === null) this.unexpected.push(`503 without Retry-After: ${JSON.stringify(answer.body)}`);
      } else {
        this.unexpected.push(`${url}: ${answer.status} ${JSON.stringify(answer.body)}`);
        if (answer.status < 500) return undefined;
      }
      await sleep(RETRY_MS);
    }
  }
}
