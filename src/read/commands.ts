import type { CommandRow, CommandSource, CommandStatus } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { fetchPage, type Page, type ListPage } from './page.ts';

export interface CommandFilter {
  readonly status?: CommandStatus;
  readonly kind?: string;
  readonly target?: ObjectRef;
  readonly issuedBy?: string;
  readonly source?: CommandSource;
}

export async function findCommand(db: Db, id: number): Promise<CommandRow> {
  const row = await db.selectFrom('commands').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError('command', id);
  return row;
}

export function listCommands(db: Db, filter: CommandFilter, page: ListPage): Promise<Page<CommandRow>> {
  const { status, kind, target, issuedBy, source } = filter;
  const query = db
    .selectFrom('commands')
    .selectAll()
    .$if(status !== undefined, (q) => q.where('status', '=', status!))
    .$if(kind !== undefined, (q) => q.where('kind', '=', kind!))
    .$if(target !== undefined, (q) => q.where('target_kind', '=', target!.kind).where('target_id', '=', target!.id))
    .$if(issuedBy !== undefined, (q) => q.where('issued_by', '=', issuedBy!))
    .$if(source !== undefined, (q) => q.where('source', '=', source!));
  return fetchPage(query, 'commands.id', page);
}
