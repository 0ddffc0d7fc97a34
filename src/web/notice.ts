import { z } from 'zod';
import type { Db } from '../db/Database.ts';
import { Id } from '../api/schemas.ts';
import { commandLink } from './format.ts';
import { blank } from './forms.ts';
import { html, type SafeHtml } from './html.ts';

/**
 * What became of a button press, carried by the redirect after the POST
 * (`?command=<id>&outcome=<what>`) so the page says it: a fixed sentence
 * per outcome, never text taken from the URL.
 */
export const OUTCOMES = {
  queued: 'Queued as',
  joined: 'One was already in flight: your request joined',
  done: 'Already done by',
  cancelled: 'Cancelled',
} as const;
export type Outcome = keyof typeof OUTCOMES;

export const NoticeQuery = {
  command: blank(Id.optional()),
  outcome: blank(z.enum(Object.keys(OUTCOMES) as [Outcome, ...Outcome[]]).optional()),
};

/**
 * The sentence, and what became of the command since: the page refreshes
 * itself with the same address, so the notice follows the command to its
 * end rather than saying "queued" of a command long done.
 */
export async function renderNotice(db: Db, query: { command?: number; outcome?: Outcome }): Promise<SafeHtml> {
  if (query.command === undefined || query.outcome === undefined) return html``;
  const command = await db.selectFrom('commands').select(['status', 'message']).where('id', '=', query.command).executeTakeFirst();
  const now = command && query.outcome !== 'cancelled' ? html`; it is ${command.status}${command.message ? `: ${command.message}` : ''}` : '';
  return html`<p class="notice" role="status">${OUTCOMES[query.outcome]} ${commandLink(query.command)}${now}.</p>`;
}

export function noticeQuery(command: number, outcome: Outcome): string {
  return `?${new URLSearchParams({ command: String(command), outcome })}`;
}
