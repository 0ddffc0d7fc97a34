import type { Command } from 'commander';
import { z } from 'zod';
import { ROLES } from '../../api/auth/roles.ts';
import { tokenOf, type Token } from '../../api/shapes.ts';
import { cliActor } from '../../domain/Actor.ts';
import { formatTime, NONE, table, type Column } from '../format.ts';
import { later } from '../later.ts';
import { parseWith } from '../parsers.ts';
import { withSession } from '../session.ts';
import { TeamNameSchema } from '../../domain/team.ts';

const tokens = () => import('../../api/auth/tokens.ts');
const createToken = later(tokens, 'createToken');
const listTokens = later(tokens, 'listTokens');
const revokeToken = later(tokens, 'revokeToken');

const TokenName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'use 1-63 lower-case letters, digits, ".", "_" or "-"');
const Role = z.enum(ROLES);

const TOKEN_COLUMNS: readonly Column<Token>[] = [
  { header: 'NAME', value: (t) => t.name },
  { header: 'ROLE', value: (t) => t.role },
  { header: 'TEAM', value: (t) => t.team },
  { header: 'CREATED', value: (t) => formatTime(t.createdAt) },
  { header: 'BY', value: (t) => t.createdBy },
  { header: 'LAST USED', value: (t) => formatTime(t.lastUsedAt) },
  { header: 'REVOKED', value: (t) => (t.revokedAt ? formatTime(t.revokedAt) : NONE) },
];

/** `token create|list|revoke`: the HTTP API's bearer tokens. */
export function addTokenCommands(program: Command): void {
  const token = program.command('token').description('API tokens: who may call the HTTP API, and as which role');

  token
    .command('create')
    .description('create a token and print its secret (shown this once; only a hash is kept)')
    .requiredOption('--name <name>', 'the token\'s name; its requests are recorded as "token:<name>"', parseWith(TokenName))
    .requiredOption('--role <role>', `one of: ${ROLES.join(', ')}`, parseWith(Role))
    .option('--team <name>', 'the team its leases count for (default: default; make teams with `slipway team set`)', parseWith(TeamNameSchema))
    .action((options: { name: string; role: (typeof ROLES)[number]; team?: string }, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const { token: made, secret } = await createToken(db, options, cliActor().issuedBy);
        out.result({ token: tokenOf(made), secret }, ({ token: t, secret }) =>
          [
            `created token ${t.name} (role ${t.role}, team ${t.team}). Its secret, shown only now:`,
            secret,
            'Send it as "Authorization: Bearer <secret>".',
          ].join('\n'),
        );
      }),
    );

  token
    .command('list')
    .description('every token (never their secrets)')
    .action((_options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const tokens = (await listTokens(db)).map(tokenOf);
        out.result(tokens, (rows) => table(rows, TOKEN_COLUMNS));
      }),
    );

  token
    .command('revoke')
    .description('revoke a token: its requests are refused (401) from now on')
    .argument('<name>', "the token's name", parseWith(TokenName))
    .action((name: string, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const revoked = tokenOf(await revokeToken(db, name));
        out.result(revoked, (t) => `revoked token ${t.name} at ${formatTime(t.revokedAt)}`);
      }),
    );
}
