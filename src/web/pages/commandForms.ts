import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiContext } from '../../api/ApiContext.ts';
import { requestCancel, requestCommand } from '../../api/requestCommand.ts';
import { COMMAND_TARGETS } from '../../api/contract.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { IdParams } from '../../api/schemas.ts';
import { CommandRejectedError } from '../../domain/errors.ts';
import { buttonKinds } from '../buttons.ts';
import { objectHref } from '../format.ts';
import { FormBase } from '../forms.ts';
import { noticeQuery, type Outcome } from '../notice.ts';

/**
 * What the buttons post. A command goes through the API's own append path
 * (requestCommand: ownership, backpressure, the state table, coalescing), so
 * a double click or a second tab's press joins the release already in
 * flight instead of queueing another, and one arriving after it finished is
 * told which command did it. The answer is a redirect (POST/redirect/GET)
 * back to the page, which says what became of the press.
 */
export async function commandForms(app: FastifyInstance, context: ApiContext): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const { db } = context.database;

  for (const { path, kind: targetKind, action } of COMMAND_TARGETS) {
    typed.route({
      method: 'POST',
      url: `/${path}/:id/commands`,
      config: { webAction: action },
      schema: { params: IdParams, body: z.object({ ...FormBase, kind: z.enum(buttonKinds(targetKind)) }).strict() },
      handler: async (request, reply) => {
        const { params, body } = request;
        const target = { kind: targetKind, id: params.id };
        let answer: { command: number; outcome: Outcome };
        try {
          const result = await requestCommand(db, context, request, target, { kind: body.kind, reason: body.reason });
          answer = { command: result.command.id, outcome: result.coalesced ? 'joined' : 'queued' };
        } catch (error) {
          const settledBy = error instanceof CommandRejectedError ? error.details.settledBy : undefined;
          if (typeof settledBy !== 'number') throw error;
          answer = { command: settledBy, outcome: 'done' };
        }
        return reply.redirect(`${objectHref(targetKind, params.id)}${noticeQuery(answer.command, answer.outcome)}`, 303);
      },
    });
  }

  typed.route({
    method: 'POST',
    url: '/commands/:id/cancel',
    config: { webAction: 'command.cancel' },
    schema: { params: IdParams, body: z.object(FormBase).strict() },
    handler: async (request, reply) => {
      const { params, body } = request;
      await requestCancel(db, request, params.id, body.reason);
      return reply.redirect(`/commands/${params.id}${noticeQuery(params.id, 'cancelled')}`, 303);
    },
  });
}
