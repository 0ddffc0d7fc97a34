import type { TokenRole } from '../../../migrations/schema.ts';

export const ROLES = ['viewer', 'user', 'operator', 'admin'] as const satisfies readonly TokenRole[];

/** Everything a route can require of its caller. */
export type Action = 'read' | 'lease.create' | 'lease.command' | 'resource.command' | 'command.cancel' | 'blueprint.write' | 'team.write';

/** How far a grant reaches: everything, or only what the caller owns. */
export type Reach = 'any' | 'own';

/**
 * THE authorization table: what each role may do. `own` means objects the
 * caller owns: leases whose holder is the token's actor (`token:<name>`,
 * which is what a lease created through the API is held by), and commands
 * the token issued. A missing entry is a refusal (403).
 */
export const GRANTS: Readonly<Record<TokenRole, Partial<Record<Action, Reach>>>> = {
  viewer: { read: 'any' },
  user: { read: 'any', 'lease.create': 'any', 'lease.command': 'own', 'command.cancel': 'own' },
  operator: {
    read: 'any',
    'lease.create': 'any',
    'lease.command': 'any',
    'resource.command': 'any',
    'command.cancel': 'any',
  },
  admin: {
    read: 'any',
    'lease.create': 'any',
    'lease.command': 'any',
    'resource.command': 'any',
    'command.cancel': 'any',
    'blueprint.write': 'any',
    'team.write': 'any',
  },
};

export function reachOf(role: TokenRole, action: Action): Reach | undefined {
  return GRANTS[role][action];
}

/**
 * The highest lease priority each role may ask for (docs/scheduling.md):
 * a user's urgent request may go ahead of the everyday ones, an operator's
 * ahead of any. The CLI on the database acts as an operator would.
 */
export const MAX_PRIORITY: Readonly<Record<TokenRole, number>> = { viewer: 0, user: 4, operator: 9, admin: 9 };
