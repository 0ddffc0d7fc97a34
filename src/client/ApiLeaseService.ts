import type { z } from 'zod';
import { type CreateLeaseBody, leaseAnswerOf } from '../api/contract.ts';
import { ResourceSchema } from '../api/shapes.ts';
import { ApiRefusal, UnexpectedAnswer, Unreachable } from './errors.ts';
import type { LeaseAsk, LeaseService } from './holdLease.ts';
import type { SlipwayClient } from './SlipwayClient.ts';

/** What `POST /v1/leases` takes: the request `withLease` makes. */
export type LeaseRequestInput = z.input<typeof CreateLeaseBody>;

/** Holding a lease over the HTTP API, as the client's token. */
export class ApiLeaseService implements LeaseService<LeaseRequestInput> {
  constructor(private readonly client: SlipwayClient) {}

  async request(body: LeaseRequestInput, options: { waitSeconds: number; idempotencyKey: string }) {
    const { waitSeconds, idempotencyKey } = options;
    return leaseAnswerOf((await this.client.call('createLease', { query: { wait: waitSeconds }, body, idempotencyKey })).body).lease;
  }

  async read(id: number) {
    return (await this.client.call('getLease', { params: { id } })).body;
  }

  async readResource(id: number) {
    // The resource's own fields: its slots are other holders' business.
    return ResourceSchema.parse((await this.client.call('getResource', { params: { id } })).body.resource);
  }

  async ask(id: number, { kind, payload, reason }: LeaseAsk): Promise<void> {
    await this.client.call('queueLeaseCommand', { params: { id }, body: { kind, reason, ...(payload ? { payload } : {}) } });
  }

  /** No answer, a 503 (with Retry-After) or a rate limit, and a proxy's 5xx while the API restarts behind it. */
  isTransient(error: unknown): boolean {
    if (error instanceof Unreachable) return true;
    if (error instanceof ApiRefusal) return error.status === 503 || (error.status === 429 && error.body.code !== 'over_quota');
    return error instanceof UnexpectedAnswer && error.status >= 500;
  }

  /** A lease that has ended refuses its commands as a conflict with its state. */
  isGone(error: unknown): boolean {
    return error instanceof ApiRefusal && error.body.code === 'conflict';
  }
}
