import type { FastifyRequest } from 'fastify';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import { reachOf, type Action } from '../api/auth/roles.ts';
import { tokenActorName } from '../api/auth/tokens.ts';
import { COMMAND_TARGETS } from '../api/contract.ts';
import { commandKindSpec, oldNamesOf, underWayWhile } from '../domain/commandKinds.ts';
import { accepts, statesAccepting } from '../domain/lifecycle.ts';
import { objectHref } from './format.ts';
import { html, type SafeHtml } from './html.ts';
import { csrfField } from './layout.ts';

/**
 * The buttons that queue a command on an object, as data. While its command
 * is under way (any kind of the command kind's `underWayWhile` in flight,
 * src/domain/commandKinds.ts: a release, then the destroy it causes) the
 * button reads `busyLabel` and is disabled, the way Drydock said
 * "releasing…" until the object was gone. Where it is enabled is the state
 * table's: the states that accept its command.
 *
 * A button that ends something looks dangerous (`ends`). One that ends
 * other people's work too asks first (`confirm`, shown by the browser
 * before the form is sent): a resource's release releases every lease on it.
 */
export interface ButtonSpec {
  readonly target: ObjectKind;
  readonly kind: string;
  readonly label: string;
  readonly busyLabel: string;
  readonly ends: boolean;
  /** What to ask before the press is sent, if anything. */
  readonly confirm?: (target: ButtonTarget) => string | undefined;
}

export const BUTTONS: readonly ButtonSpec[] = [
  { target: 'lease', kind: 'release', label: 'Release', busyLabel: 'releasing…', ends: true },
  { target: 'resource', kind: 'cordon', label: 'Cordon', busyLabel: 'cordoning…', ends: false },
  { target: 'resource', kind: 'uncordon', label: 'Uncordon', busyLabel: 'uncordoning…', ends: false },
  { target: 'resource', kind: 'check', label: 'Check', busyLabel: 'checking…', ends: false },
  { target: 'resource', kind: 'repair', label: 'Repair', busyLabel: 'repairing…', ends: false },
  { target: 'resource', kind: 'retire', label: 'Retire', busyLabel: 'retiring…', ends: true },
  {
    target: 'resource',
    kind: 'release',
    label: 'Release',
    busyLabel: 'releasing…',
    ends: true,
    confirm: ({ id, leases = 0 }) =>
      leases === 0
        ? undefined
        : `Release resource ${id}? ${leases === 1 ? 'Its lease is released first, whoever holds it' : `Its ${leases} leases are released first, whoever holds them`}.`,
  },
  { target: 'resource', kind: 'reclaim', label: 'Reclaim', busyLabel: 'reclaiming…', ends: true },
  { target: 'blueprint', kind: 'cordon', label: 'Cordon all', busyLabel: 'cordoning…', ends: false },
  { target: 'blueprint', kind: 'uncordon', label: 'Uncordon all', busyLabel: 'uncordoning…', ends: false },
];

/**
 * The command kinds a form may post for each object: the buttons', and the
 * old names of theirs, which a page served by the release before still
 * posts during a roll (appended as the new ones).
 */
export function buttonKinds(target: ObjectKind): [string, ...string[]] {
  return BUTTONS.filter((b) => b.target === target).flatMap((b) => [b.kind, ...oldNamesOf(target, b.kind)]) as [string, ...string[]];
}

/** What the signed-in role's grant for commands on this kind of object reaches, if anything. */
function commandAction(target: ObjectKind): Action {
  const found = COMMAND_TARGETS.find((t) => t.kind === target);
  if (!found) throw new Error(`no command route for ${target}`);
  return found.action;
}

/** May the signed-in user act on an object owned by `owner` (undefined: objects nobody owns, such as resources)? */
function mayAct(request: FastifyRequest, action: Action, owner: string | undefined): boolean {
  const token = request.session?.token;
  if (!token) return false;
  const reach = reachOf(token.role, action);
  return reach === 'any' || (reach === 'own' && owner === tokenActorName(token.name));
}

export interface ButtonTarget {
  readonly kind: ObjectKind;
  readonly id: number;
  readonly state: string;
  /** The object's queued and running commands. */
  readonly queue: readonly Pick<CommandRow, 'kind'>[];
  readonly owner?: string;
  /** The leases it holds slots for (a resource), whom a release would end too. */
  readonly leases?: number;
}

/**
 * The object's buttons, in one form (one optional reason shared by them):
 * none for a role that may not act on it; each disabled, saying why, when
 * the state table does not accept its command in the object's state; and
 * "releasing…" while its command is in flight. The reason box shows only
 * while some button can be pressed.
 */
export function commandButtons(request: FastifyRequest, target: ButtonTarget): SafeHtml {
  if (!mayAct(request, commandAction(target.kind), target.owner)) return html``;
  const inFlight = new Set(target.queue.map((c) => c.kind));
  const specs = BUTTONS.filter((b) => b.target === target.kind).map((spec) => ({
    spec,
    busy: underWayWhile(target.kind, spec.kind).some((kind) => inFlight.has(kind)),
    allowed: accepts(target.kind, target.state, spec.kind),
  }));
  const buttons = specs.map(({ spec, busy, allowed }) => {
    if (busy) return html`<button type="button" disabled class="busy" data-kind="${spec.kind}">${spec.busyLabel}</button>`;
    const why = allowed
      ? ''
      : `${/^[aeiou]/.test(target.state) ? 'an' : 'a'} ${target.state} ${target.kind} takes no ${spec.kind} (only ${statesAccepting(target.kind, spec.kind).join(', ')})`;
    const confirm = allowed ? spec.confirm?.(target) : undefined;
    return html`<button type="submit" name="kind" value="${spec.kind}" data-kind="${spec.kind}"${spec.ends ? html` class="danger"` : ''}${confirm ? html` data-confirm="${confirm}"` : ''}${allowed ? '' : html` disabled title="${why}"`}>${spec.label}</button>`;
  });
  // A reason box only while a press is possible: nothing is left to explain on a destroyed object.
  const reason = specs.some(({ busy, allowed }) => allowed && !busy)
    ? html`<label>Reason <span class="muted">(optional)</span> <input type="text" name="reason" maxlength="1000" autocomplete="off"></label>`
    : '';
  return html`<form class="actions" method="post" action="${objectHref(target.kind, target.id)}/commands" data-once>
  ${csrfField(request)}
  ${reason}
  ${buttons}
</form>`;
}

/** Cancel, for a command still queued that the signed-in user may cancel (an internal command never can be). */
export function cancelButton(request: FastifyRequest, command: CommandRow): SafeHtml {
  if (command.status !== 'queued' || commandKindSpec(command.target_kind, command.kind)?.internal) return html``;
  if (!mayAct(request, 'command.cancel', command.issued_by)) return html``;
  return html`<form class="actions inline" method="post" action="/commands/${command.id}/cancel" data-once>
  ${csrfField(request)}
  <button type="submit" data-kind="cancel" class="danger">Cancel command ${command.id}</button>
</form>`;
}
