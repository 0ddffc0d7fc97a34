import type { CommandRow } from '../../../migrations/schema.ts';
import type { CallbackView } from '../../read/callbacks.ts';
import type { CommandTreeNode } from '../../read/commandTree.ts';
import { type Column, fields, formatJson, formatSeconds, formatTime, NONE, section, table, targetLabel } from '../format.ts';
import { renderCallbacks } from './callbackViews.ts';

/** "#13 acquire resource:3": how every view names a command. */
export function commandName(command: Pick<CommandRow, 'id' | 'kind' | 'target_kind' | 'target_id'>): string {
  return `#${command.id} ${command.kind} ${targetLabel(command.target_kind, command.target_id)}`;
}

/** One line per status change while waiting, indented by the command's depth in its tree. */
export function progressLine(node: CommandTreeNode): string {
  return `${'  '.repeat(node.depth)}${commandName(node)} → ${node.status}${node.message ? `: ${node.message}` : ''}`;
}

export const COMMAND_COLUMNS: readonly Column<CommandRow>[] = [
  { header: 'ID', value: (c) => String(c.id) },
  { header: 'TARGET', value: (c) => targetLabel(c.target_kind, c.target_id) },
  { header: 'KIND', value: (c) => c.kind },
  { header: 'STATUS', value: (c) => c.status },
  { header: 'BY', value: (c) => `${c.issued_by} (${c.source})` },
  { header: 'CREATED', value: (c) => formatTime(c.created_at) },
  { header: 'MESSAGE', value: (c) => c.message ?? '' },
];

/** A tree node's timing: when it was appended after the root, and how long until it settled. */
function treeColumns(root: CommandTreeNode): readonly Column<CommandTreeNode>[] {
  const since = (at: Date) => `+${formatSeconds(at.getTime() - root.created_at.getTime())}`;
  return [
    { header: 'COMMAND', value: (n) => `${'  '.repeat(n.depth)}#${n.id}` },
    { header: 'KIND', value: (n) => n.kind },
    { header: 'TARGET', value: (n) => targetLabel(n.target_kind, n.target_id) },
    { header: 'STATUS', value: (n) => n.status },
    { header: 'QUEUED', value: (n) => since(n.created_at) },
    { header: 'TOOK', value: (n) => (n.finished_at ? formatSeconds(n.finished_at.getTime() - n.created_at.getTime()) : NONE) },
    { header: 'MESSAGE', value: (n) => n.message ?? '' },
  ];
}

function renderCommandTree(tree: readonly CommandTreeNode[]): string {
  return tree.length === 0 ? '(none)' : table(tree, treeColumns(tree[0]!));
}

export function renderCommandDetail({
  command,
  tree,
  callbacks = [],
}: {
  command: CommandRow;
  tree: readonly CommandTreeNode[];
  callbacks?: readonly CallbackView[];
}): string {
  const detail = fields(`command ${commandName(command)}: ${command.status}`, [
    ['message', command.message ?? NONE],
    ['issued by', `${command.issued_by} via ${command.source}`],
    ['reason', command.reason ?? NONE],
    ['request id', command.request_id ?? NONE],
    ['version', String(command.version)],
    ['payload', formatJson(command.payload)],
    ['caused by', command.caused_by ? `#${command.caused_by}` : NONE],
    ['coalesced into', command.coalesced_into ? `#${command.coalesced_into}` : NONE],
    ['attempts', String(command.attempts)],
    ['not before', formatTime(command.not_before)],
    ['created', formatTime(command.created_at)],
    ['started', formatTime(command.started_at)],
    ['finished', formatTime(command.finished_at)],
  ]);
  const caused = section('what it caused', renderCommandTree(tree).split('\n'));
  return callbacks.length === 0 ? `${detail}\n\n${caused}` : `${detail}\n\n${caused}\n\n${renderCallbacks(callbacks)}`;
}
