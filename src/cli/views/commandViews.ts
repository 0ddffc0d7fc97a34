import type { Callback, Command, CommandTreeNodeShape } from '../../api/shapes.ts';
import { type Column, fields, formatJson, formatSeconds, formatTime, NONE, section, table, targetLabel } from '../format.ts';
import { renderCallbacks } from './callbackViews.ts';

/** "#13 acquire resource:3": how every view names a command. */
export function commandName(command: Pick<Command, 'id' | 'kind' | 'targetKind' | 'targetId'>): string {
  return `#${command.id} ${command.kind} ${targetLabel(command.targetKind, command.targetId)}`;
}

/** One line per status change while waiting, indented by the command's depth in its tree. */
export function progressLine(node: CommandTreeNodeShape): string {
  return `${'  '.repeat(node.depth)}${commandName(node)} → ${node.status}${node.message ? `: ${node.message}` : ''}`;
}

export const COMMAND_COLUMNS: readonly Column<Command>[] = [
  { header: 'ID', value: (c) => String(c.id) },
  { header: 'TARGET', value: (c) => targetLabel(c.targetKind, c.targetId) },
  { header: 'KIND', value: (c) => c.kind },
  { header: 'STATUS', value: (c) => c.status },
  { header: 'BY', value: (c) => `${c.issuedBy} (${c.source})` },
  { header: 'CREATED', value: (c) => formatTime(c.createdAt) },
  { header: 'MESSAGE', value: (c) => c.message ?? '' },
];

/** A tree node's timing: when it was appended after the root, and how long until it settled. */
function treeColumns(root: CommandTreeNodeShape): readonly Column<CommandTreeNodeShape>[] {
  const since = (at: string) => `+${formatSeconds(Date.parse(at) - Date.parse(root.createdAt))}`;
  return [
    { header: 'COMMAND', value: (n) => `${'  '.repeat(n.depth)}#${n.id}` },
    { header: 'KIND', value: (n) => n.kind },
    { header: 'TARGET', value: (n) => targetLabel(n.targetKind, n.targetId) },
    { header: 'STATUS', value: (n) => n.status },
    { header: 'QUEUED', value: (n) => since(n.createdAt) },
    { header: 'TOOK', value: (n) => (n.finishedAt ? formatSeconds(Date.parse(n.finishedAt) - Date.parse(n.createdAt)) : NONE) },
    { header: 'MESSAGE', value: (n) => n.message ?? '' },
  ];
}

function renderCommandTree(tree: readonly CommandTreeNodeShape[]): string {
  return tree.length === 0 ? '(none)' : table(tree, treeColumns(tree[0]!));
}

export function renderCommandDetail({
  command,
  tree,
  callbacks = [],
}: {
  command: Command;
  tree: readonly CommandTreeNodeShape[];
  callbacks?: readonly Callback[];
}): string {
  const detail = fields(`command ${commandName(command)}: ${command.status}`, [
    ['message', command.message ?? NONE],
    ['issued by', `${command.issuedBy} via ${command.source}`],
    ['reason', command.reason ?? NONE],
    ['request id', command.requestId ?? NONE],
    ['version', String(command.version)],
    ['payload', formatJson(command.payload)],
    ['caused by', command.causedBy ? `#${command.causedBy}` : NONE],
    ['coalesced into', command.coalescedInto ? `#${command.coalescedInto}` : NONE],
    ['attempts', String(command.attempts)],
    ['not before', formatTime(command.notBefore)],
    ['created', formatTime(command.createdAt)],
    ['started', formatTime(command.startedAt)],
    ['finished', formatTime(command.finishedAt)],
  ]);
  const caused = section('what it caused', renderCommandTree(tree).split('\n'));
  return callbacks.length === 0 ? `${detail}\n\n${caused}` : `${detail}\n\n${caused}\n\n${renderCallbacks(callbacks)}`;
}
