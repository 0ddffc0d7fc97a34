/**
 * The Slipway client library, `import { SlipwayClient } from 'slipway/client'`
 * (docs/client.md): the typed API client and its lease holder.
 */
export { SlipwayClient, type CallAnswer, type CallInput, type ClientOptions, type OperationName } from './SlipwayClient.ts';
export { ApiRefusal, UnexpectedAnswer, Unreachable } from './errors.ts';
export { LeaseEnding, LeaseLost, LeaseNotGranted, LeaseUnreachable, type LeaseEnd, type NotGrantedWhy } from './leaseErrors.ts';
export { DEFAULT_HEARTBEAT_MS } from '../domain/holding.ts';
export type { HeldLease, HoldEvent, HoldOptions, WorkOutcome } from './holdLease.ts';
export type { LeaseRequestInput } from './ApiLeaseService.ts';
export { leaseAnswerOf, type LeaseAnswer, type LeaseDetail } from '../api/contract.ts';
export type { ExplanationShape as Explanation, Lease, LineStandingShape as LineStanding, Resource } from '../api/shapes.ts';
