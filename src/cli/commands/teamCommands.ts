import type { Command } from 'commander';
import { type Team, teamDetailOf, teamOf } from '../../api/shapes.ts';
import { BlueprintRef as BlueprintRefArg } from '../../api/schemas.ts';
import { cliActor } from '../../domain/Actor.ts';
import { TeamNameSchema } from '../../domain/team.ts';
import type { BlueprintRef } from '../../read/blueprints.ts';
import { fields, formatTime, NONE, section, table, type Column } from '../format.ts';
import { later } from '../later.ts';
import { countBetween, parseWith, textUpTo } from '../parsers.ts';
import { withSession } from '../session.ts';

const teams = () => import('../../objects/teams.ts');
const setTeam = later(teams, 'setTeam');
const setQuota = later(teams, 'setQuota');
const removeQuota = later(teams, 'removeQuota');
const teamReads = () => import('../../read/teams.ts');
const listTeams = later(teamReads, 'listTeams');
const readTeam = later(teamReads, 'readTeam');

const TEAM_COLUMNS: readonly Column<Team>[] = [
  { header: 'NAME', value: (t) => t.name },
  { header: 'WEIGHT', value: (t) => String(t.weight) },
  { header: 'TOKENS', value: (t) => String(t.tokens) },
  { header: 'LEASES', value: (t) => String(t.counted) },
  { header: 'WAITING', value: (t) => String(t.waiting) },
  { header: 'QUOTAS', value: (t) => (t.quotas.length === 0 ? NONE : t.quotas.map(quotaText).join('; ')) },
];

/** "3 of 5 at sandboxes", "1 of 1 overall for token:bot". */
function quotaText(q: Team['quotas'][number]): string {
  return `${q.counted} of ${q.maxLeases} ${q.blueprintName === null ? 'overall' : `at ${q.blueprintName}`}${q.holder === null ? '' : ` for ${q.holder}`}`;
}

interface ScopeOptions {
  readonly blueprint?: BlueprintRef;
  readonly holder?: string;
}

/** The options that say where a quota applies, shared by `team quota` and `team unquota`. */
function addScopeOptions(command: Command): Command {
  return command
    .option('--blueprint <name|id>', 'at this blueprint only (default: overall, at every blueprint)', parseWith(BlueprintRefArg))
    .option(
      '--holder <name>',
      'for this holder of the team only, as leases name it, e.g. token:ci-bot (default: the whole team)',
      parseWith(textUpTo(200)),
    );
}

/** `team list|show|set|quota|unquota`: teams, their weights and quotas (docs/scheduling.md). */
export function addTeamCommands(program: Command): void {
  const team = program.command('team').description('teams: their weights (shares of a contended blueprint) and quotas');

  team
    .command('list')
    .description('every team, with its weight, what it holds and waits for, and its quotas')
    .action((_options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        out.result((await listTeams(db)).map(teamOf), (rows) => table(rows, TEAM_COLUMNS));
      }),
    );

  team
    .command('show')
    .description('a team, its quotas and every change made to it')
    .argument('<name>', "the team's name", parseWith(TeamNameSchema))
    .action((name: string, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        out.result(teamDetailOf(await readTeam(db, name)), (t) =>
          [
            fields(`team ${t.name}`, [
              ['weight', String(t.weight)],
              ['tokens', String(t.tokens)],
              ['leases', `${t.counted} holding or on their way to a slot`],
              ['waiting', String(t.waiting)],
              ['created', `${formatTime(t.createdAt)} by ${t.createdBy}`],
            ]),
            section('quotas', t.quotas.map(quotaText)),
            section(
              'changes',
              t.changes.map((c) => `${formatTime(c.at)}  ${c.message}  (${c.actor}, ${c.source})`),
            ),
          ].join('\n'),
        );
      }),
    );

  team
    .command('set')
    .description("make a team, or set its weight: its share of a contended blueprint against the other teams' weights")
    .argument('<name>', "the team's name", parseWith(TeamNameSchema))
    .option('--weight <n>', 'its weight, 1 to 1000 (a new team: 1 unless given)', parseWith(countBetween(1, 1000)))
    .action((name: string, options: { weight?: number }, command: Command) =>
      withSession(command, async ({ db, out }) => {
        await setTeam(db, { name, ...options }, cliActor());
        out.result(teamOf(await readTeam(db, name)), (t) => `team ${t.name}: weight ${t.weight}`);
      }),
    );

  addScopeOptions(
    team
      .command('quota')
      .description('set a quota: at most --max leases of the team (or holder) at once; requests over it wait, and a lower quota ends no lease')
      .argument('<name>', "the team's name", parseWith(TeamNameSchema))
      .requiredOption('--max <n>', 'at most this many leases at once (0: no new ones)', parseWith(countBetween(0, 100_000))),
  ).action((name: string, options: ScopeOptions & { max: number }, command: Command) =>
    withSession(command, async ({ db, out }) => {
      const { max, ...scope } = options;
      await setQuota(db, { team: name, ...scope, maxLeases: max }, cliActor());
      out.result(teamOf(await readTeam(db, name)), (t) => `team ${t.name}: quotas ${t.quotas.map(quotaText).join('; ')}`);
    }),
  );

  addScopeOptions(
    team
      .command('unquota')
      .description('remove a quota (the one of that scope); the waiters it held back are served')
      .argument('<name>', "the team's name", parseWith(TeamNameSchema)),
  ).action((name: string, options: ScopeOptions, command: Command) =>
    withSession(command, async ({ db, out }) => {
      await removeQuota(db, { team: name, ...options }, cliActor());
      out.result(
        teamOf(await readTeam(db, name)),
        (t) => `team ${t.name}: quotas ${t.quotas.length === 0 ? 'none' : t.quotas.map(quotaText).join('; ')}`,
      );
    }),
  );
}
