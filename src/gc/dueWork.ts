import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import { systemActorName } from '../domain/Actor.ts';
import { formatDuration } from '../domain/durations.ts';
import { formatTime } from '../domain/times.ts';
import { describeDeadline } from '../objects/leaseDeadlines.ts';
import { type AppendedRow, type AppendRequest, appendBatchStatement, batchedAppend, signalWorkersOnCommit } from '../queue/appendCommand.ts';
import { recordAppended } from '../metrics/metrics.ts';
import { describeObject } from '../db/objectTables.ts';
import { dueChecks, dueLeases, dueNotices, forgetUnchangedChecks } from './dueTimes.ts';
import { type Ending, endReasonOf } from '../domain/ending.ts';
import { commandKindSpec } from '../domain/commandKinds.ts';
import { GC_ACTOR, type GcAction, type GcPass, type StepReport } from './GcPass.ts';

/** The two kinds of time-driven work: releases for passed deadlines, and health checks. */
export type DuePart = 'leases' | 'checks';

/**
 * One key for the time-driven work, in the one-key advisory lock space
 * beside the collector's (`SLGC`): "SLTD". Objects' keys have `SL` in their
 * top 16 bits (object_lock_key), so this cannot be one of them.
 */
const DUE_WORK_LOCK = sql`x'534c5444'::bigint`;

/**
 * Appends, as `system:gc` (a wait deadline's release, and a time limit's,
 * as `system:deadline`) and with the reasons the collector has always
 * given, a conditional `release` for each lease past a deadline, a
 * `notify_ending` for each lease whose holder is due a notice of its time
 * limit, and a `check` for each resource due one, at most `limit` of each, in ONE transaction that holds the
 * time-driven work's advisory lock: so two workers never ask for the same
 * thing twice (the second to take the lock reads, after the first's commit,
 * that a release or check is on its way, and leaves that lease or resource
 * alone). The appends are one statement (a batch), and the signal that
 * wakes the drains follows the commit.
 *
 * `waitForLock` false (a timekeeper): when another holds the lock, returns
 * undefined at once; that one is doing this work. True (a collector pass):
 * waits for it, which is as long as one batch takes.
 *
 * Nothing here writes an object's row: each object's own drain applies
 * what is asked, and the lease's release checks the deadline again then
 * (`ifExpired`), so a renewal queued first, or a grant that activated the
 * lease first, wins.
 */
export async function appendDueWork(
  db: Db,
  parts: readonly DuePart[],
  options: { readonly limit: number; readonly waitForLock: boolean },
): Promise<Partial<Record<DuePart, StepReport>> | undefined> {
  return withTransaction(db, async (trx) => {
    const { rows } = await (options.waitForLock
      ? sql<{ locked: boolean }>`select true as locked from pg_advisory_xact_lock(${DUE_WORK_LOCK})`
      : sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(${DUE_WORK_LOCK}) as locked`
    ).execute(trx);
    if (!rows[0]!.locked) return undefined;
    const asked: Array<{ part: DuePart; request: AppendRequest }> = [];
    const found: Partial<Record<DuePart, number>> = {};
    if (parts.includes('leases')) {
      const leases = await dueLeases(trx, options.limit);
      found.leases = leases.length;
      for (const lease of leases) {
        const { reason, issuedBy } = describeDeadline(lease, lease.now)!;
        asked.push({
          part: 'leases',
          request: {
            target: { kind: 'lease', id: lease.id },
            kind: 'release',
            payload: { ifExpired: true },
            actor: { ...GC_ACTOR, issuedBy, reason },
          },
        });
      }
      const notices = await dueNotices(trx, options.limit);
      found.leases += notices.length;
      for (const notice of notices) {
        const ending: Ending = { ...endReasonOf(notice), at: notice.end_by.toISOString() };
        asked.push({
          part: 'leases',
          request: {
            target: { kind: 'lease', id: notice.id },
            kind: 'notify_ending',
            payload: ending,
            actor: { ...GC_ACTOR, issuedBy: systemActorName('deadline'), reason: `ends by ${formatTime(notice.end_by)}: ${ending.reason}` },
          },
        });
      }
    }
    if (parts.includes('checks')) {
      const resources = await dueChecks(trx, options.limit);
      found.checks = resources.length;
      await forgetUnchangedChecks(
        trx,
        resources.map((r) => r.id),
      );
      for (const resource of resources) {
        const last = resource.checked_at ? `last checked ${formatTime(resource.checked_at)}` : 'never checked';
        const reason = `${last}; checked every ${formatDuration(resource.check_interval_ms)}`;
        asked.push({
          part: 'checks',
          request: {
            target: { kind: 'resource', id: resource.id },
            kind: 'check',
            actor: { ...GC_ACTOR, issuedBy: systemActorName('health'), reason },
          },
        });
      }
    }
    const answers = await appendAll(
      trx,
      asked.map((a) => a.request),
    );
    if (answers.some((a) => a.commandId !== undefined && !a.coalesced)) await signalWorkersOnCommit(trx, asked[0]!.request.target);
    const reports: Partial<Record<DuePart, StepReport>> = {};
    for (const part of parts) {
      const n = found[part] ?? 0;
      reports[part] = { found: n, actions: answers.filter((_, i) => asked[i]!.part === part), truncated: n >= options.limit };
    }
    return reports;
  });
}

/** A collector pass's step of one part: a batch after another while batches come back full and the pass has time. */
export async function duePassStep(pass: GcPass, part: DuePart): Promise<StepReport> {
  const actions: GcAction[] = [];
  let found = 0;
  let truncated = true;
  while (truncated && !pass.outOfTime) {
    const report = (await appendDueWork(pass.db, [part], { limit: pass.settings.batchSize, waitForLock: true }))![part]!;
    found += report.found;
    actions.push(...report.actions);
    truncated = report.truncated;
  }
  return { found, actions, truncated };
}

/**
 * Every request as one statement (appendBatchStatement), each answered as
 * the collector records it. A release or check is asked as anyone may ask
 * it; a command only Slipway issues (a notice of a lease's end) as its own.
 */
async function appendAll(trx: Db, requests: readonly AppendRequest[]): Promise<GcAction[]> {
  if (requests.length === 0) return [];
  const statement = appendBatchStatement(
    requests.map((request) => batchedAppend(request, { fromOutside: !commandKindSpec(request.target.kind, request.kind)!.internal })),
  );
  const { rows } = await trx.executeQuery(statement);
  const byAppend = new Map<number, Array<AppendedRow & { n: number }>>();
  for (const row of rows) byAppend.set(row.n, [...(byAppend.get(row.n) ?? []), row]);
  return requests.map((request, i) => answer(request, byAppend.get(i + 1) ?? []));
}

/** What became of one request: its command, the one it joined, or why its object refused it. */
function answer(request: AppendRequest, rows: ReadonlyArray<AppendedRow>): GcAction {
  const base = { target: `${request.target.kind}:${request.target.id}`, kind: request.kind, reason: request.actor.reason ?? '' };
  const part = (name: AppendedRow['part']) => rows.find((r) => r.part === name);
  const inserted = part('inserted');
  if (inserted) {
    recordAppended(inserted, GC_ACTOR.source);
    return { ...base, commandId: inserted.id };
  }
  const into = part('coalesced_into');
  if (into) return { ...base, commandId: into.id, coalesced: true };
  const rejected = part('rejected');
  if (rejected) return { ...base, refused: `${describeObject(request.target)} is ${rejected.object_state}; ${request.kind} no longer applies` };
  return { ...base, refused: `${describeObject(request.target)} does not exist` };
}
