import type { CommandStatus, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';

/** A command named by another: enough to link to it and say what it is. */
export interface LinkedCommand {
  readonly id: number;
  readonly kind: string;
  readonly status: CommandStatus;
  readonly targetKind: ObjectKind;
  readonly targetId: number;
}

/** Which command caused each of some commands, and which commands each caused (often on other objects). */
export interface CommandLinks {
  readonly causedBy: ReadonlyMap<number, LinkedCommand>;
  readonly caused: ReadonlyMap<number, LinkedCommand[]>;
}

const LINK_COLUMNS = ['id', 'kind', 'status', 'target_kind', 'target_id', 'caused_by'] as const;

/** The caused-by links of `ids`, both ways, in two indexed queries (primary key and commands_by_cause). */
export async function readCommandLinks(db: Db, ids: readonly number[]): Promise<CommandLinks> {
  if (ids.length === 0) return { causedBy: new Map(), caused: new Map() };
  const parents = await db
    .selectFrom('commands as child')
    .innerJoin('commands', 'commands.id', 'child.caused_by')
    .select(['child.id as child_id', ...LINK_COLUMNS.map((c) => `commands.${c}` as const)])
    .where('child.id', 'in', ids)
    .execute();
  const children = await db.selectFrom('commands').select(LINK_COLUMNS).where('caused_by', 'in', ids).orderBy('id').execute();
  const caused = new Map<number, LinkedCommand[]>();
  for (const child of children) caused.set(child.caused_by!, [...(caused.get(child.caused_by!) ?? []), linked(child)]);
  return { causedBy: new Map(parents.map((row) => [row.child_id, linked(row)])), caused };
}

function linked(row: { id: number; kind: string; status: CommandStatus; target_kind: ObjectKind; target_id: number }): LinkedCommand {
  return { id: row.id, kind: row.kind, status: row.status, targetKind: row.target_kind, targetId: row.target_id };
}
