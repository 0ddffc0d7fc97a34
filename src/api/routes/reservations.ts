import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { cancelReservation, createReservation } from '../../objects/reservations.ts';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { listReservations, readReservation } from '../../read/reservations.ts';
import type { ApiContext } from '../ApiContext.ts';
import { actorOf } from '../auth/authenticate.ts';
import { OPERATIONS } from '../contract.ts';
import { runPost } from '../respond.ts';
import { reservationOf } from '../shapes.ts';
import { routeOf } from '../typedRoutes.ts';

/** Reservations (docs/scheduling.md, "Reservations"): read by anyone, made and cancelled by those who may change blueprints. */
export async function reservationRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  const typed = app.withTypeProvider<ZodTypeProvider>();

  typed.route({
    ...routeOf(OPERATIONS.createReservation),
    handler: async (request, reply) => {
      const { reason, ...input } = request.body;
      await runPost(context, request, reply, async (db) => {
        const reservation = await createReservation(db, input, actorOf(request, reason));
        return { response: { status: 201, headers: { location: `/v1/reservations/${reservation.id}` }, body: reservationOf(reservation) } };
      });
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.listReservations),
    handler: async ({ query }) => {
      const blueprintId = await blueprintIdFilter(db, query.blueprint);
      return { items: (await listReservations(db, { blueprintId, state: query.state })).map(reservationOf) };
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.getReservation),
    handler: async ({ params }) => reservationOf(await readReservation(db, params.id)),
  });

  typed.route({
    ...routeOf(OPERATIONS.cancelReservation),
    handler: async (request, reply) => {
      await runPost(context, request, reply, async (db) => {
        const reservation = await cancelReservation(db, request.params.id, actorOf(request, request.body.reason));
        return { response: { status: 200, headers: {}, body: reservationOf(reservation) } };
      });
    },
  });
}
