import type { Command } from 'commander';
import { BlueprintRef as BlueprintRefArg } from '../../api/schemas.ts';
import { type Reservation, reservationOf } from '../../api/shapes.ts';
import { cliActor } from '../../domain/Actor.ts';
import { describeWhoMay, RESERVATION_STATES, type ReservationState } from '../../domain/reservations.ts';
import { TeamNameSchema } from '../../domain/team.ts';
import type { BlueprintRef } from '../../read/blueprints.ts';
import { fields, formatTime, NONE, table, type Column } from '../format.ts';
import { later } from '../later.ts';
import { countBetween, Duration, parseWith, PositiveId, textUpTo, WindowTime } from '../parsers.ts';
import { formatDuration } from '../../domain/durations.ts';
import { withSession } from '../session.ts';
import { z } from 'zod';

const reservations = () => import('../../objects/reservations.ts');
const createReservation = later(reservations, 'createReservation');
const cancelReservation = later(reservations, 'cancelReservation');
const reservationReads = () => import('../../read/reservations.ts');
const listReservations = later(reservationReads, 'listReservations');
const readReservation = later(reservationReads, 'readReservation');
const blueprintIdFilter = later(() => import('../../read/blueprints.ts'), 'blueprintIdFilter');

const whoMay = (r: Reservation) => describeWhoMay(r.team, r.holders);

const RESERVATION_COLUMNS: readonly Column<Reservation>[] = [
  { header: 'ID', value: (r) => String(r.id) },
  { header: 'BLUEPRINT', value: (r) => r.blueprintName },
  { header: 'SLOTS', value: (r) => String(r.slots) },
  { header: 'FROM', value: (r) => formatTime(r.from) },
  { header: 'TO', value: (r) => formatTime(r.to) },
  { header: 'STATE', value: (r) => r.state },
  { header: 'FOR', value: whoMay },
  { header: 'HOLDING', value: (r) => String(r.holding) },
  { header: 'WAITING', value: (r) => String(r.waiting) },
];

/** One line: "reservation 3: 2 slot(s) of sandboxes from … to … (active)". */
const summary = (r: Reservation) =>
  `reservation ${r.id}: ${r.slots} slot(s) of ${r.blueprintName} from ${formatTime(r.from)} to ${formatTime(r.to)} for ${whoMay(r)} (${r.state})`;

/** `reservation create|list|show|cancel`: slots of a blueprint held for a window (docs/scheduling.md, "Reservations"). */
export function addReservationCommands(program: Command): void {
  const reservation = program
    .command('reservation')
    .description('reservations: slots of a blueprint held back for a window, for the leases that name them');

  reservation
    .command('create')
    .description(
      'hold --slots of a blueprint from --from to --to: leases that do not name the reservation do not get them then, and those that do are served from them first, ahead of the line',
    )
    .requiredOption('--blueprint <name|id>', 'the blueprint whose slots to hold', parseWith(BlueprintRefArg))
    .requiredOption('--slots <n>', 'how many slots', parseWith(countBetween(1, 100_000)))
    .option(
      '--from <time>',
      'the window opens: now (the default), +<duration> (e.g. +1h), or an ISO 8601 time with its offset',
      parseWith(WindowTime),
    )
    .requiredOption('--to <time>', 'the window ends: +<duration> from now (e.g. +4h), or an ISO 8601 time with its offset', parseWith(WindowTime))
    .option('--team <name>', 'only leases of this team may use it', parseWith(TeamNameSchema))
    .option(
      '--hand-back-after <duration>',
      'hand the slots its leases do not use back to the line this long after the window opens, e.g. 15m (default: held to its end)',
      parseWith(Duration),
    )
    .option(
      '--holder <name>',
      'only leases of this holder may use it (repeat for more), as leases name it, e.g. token:ci-bot',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), parseWith(textUpTo(200))(value)],
    )
    .option('--reason <text>', 'why: recorded on the reservation and the blueprint timeline', parseWith(textUpTo(1000)))
    .action(
      (
        options: {
          blueprint: BlueprintRef;
          slots: number;
          from?: string;
          to: string;
          team?: string;
          holder?: string[];
          handBackAfter?: number;
          reason?: string;
        },
        command: Command,
      ) =>
        withSession(command, async ({ db, out }) => {
          const { blueprint, slots, to, team, holder, handBackAfter, reason } = options;
          const from = options.from ?? new Date().toISOString();
          const made = await createReservation(
            db,
            { blueprint, slots, from, to, team, holders: holder, handBackAfterMs: handBackAfter },
            cliActor(reason),
          );
          out.result(reservationOf(made), summary);
        }),
    );

  reservation
    .command('list')
    .description('reservations by window, the soonest first (at most 1,000)')
    .option('--blueprint <name|id>', "only this blueprint's", parseWith(BlueprintRefArg))
    .option('--state <state>', `only those ${RESERVATION_STATES.join(', ')}`, parseWith(z.enum(RESERVATION_STATES)))
    .action((options: { blueprint?: BlueprintRef; state?: ReservationState }, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const blueprintId = await blueprintIdFilter(db, options.blueprint);
        const items = (await listReservations(db, { blueprintId, state: options.state })).map(reservationOf);
        out.result({ items }, ({ items }) => (items.length === 0 ? 'no reservations' : table(items, RESERVATION_COLUMNS)));
      }),
    );

  reservation
    .command('show')
    .description('a reservation: its window, who may use it, its leases, and who made or cancelled it')
    .argument('<id>', "the reservation's id", parseWith(PositiveId))
    .action((id: number, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        out.result(reservationOf(await readReservation(db, id)), (r) =>
          fields(`reservation ${r.id}`, [
            ['blueprint', r.blueprintName],
            ['slots', String(r.slots)],
            ['window', `${formatTime(r.from)} to ${formatTime(r.to)}`],
            ['state', r.state],
            ['for', whoMay(r)],
            [
              'hand back',
              r.handBackAfterMs === null
                ? 'never: held to its end'
                : `unused slots ${formatDuration(r.handBackAfterMs)} after it opens (${formatTime(new Date(Date.parse(r.from) + r.handBackAfterMs).toISOString())})`,
            ],
            ['leases', `${r.holding} holding, ${r.waiting} waiting`],
            ['created', `${formatTime(r.createdAt)} by ${r.createdBy} (${r.createdSource})${r.reason ? `: ${r.reason}` : ''}`],
            [
              'cancelled',
              r.cancelledAt === null
                ? NONE
                : `${formatTime(r.cancelledAt)} by ${r.cancelledBy} (${r.cancelledSource})${r.cancelReason ? `: ${r.cancelReason}` : ''}`,
            ],
          ]),
        );
      }),
    );

  reservation
    .command('cancel')
    .description('cancel a reservation: the slots it holds back go to the line at once; its leases keep what they hold')
    .argument('<id>', "the reservation's id", parseWith(PositiveId))
    .option('--reason <text>', 'why: recorded on the reservation and the blueprint timeline', parseWith(textUpTo(1000)))
    .action((id: number, options: { reason?: string }, command: Command) =>
      withSession(command, async ({ db, out }) => {
        out.result(reservationOf(await cancelReservation(db, id, cliActor(options.reason))), summary);
      }),
    );
}
