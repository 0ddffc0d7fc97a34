import type { Command } from 'commander';
import { cliActor } from '../../domain/Actor.ts';
import { InvalidInputError } from '../../domain/errors.ts';
import { withTransaction } from '../../db/withTransaction.ts';
import type { BlueprintRef } from '../../read/blueprints.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { blueprintDetailOf, blueprintOf, historyOf, listedBlueprintOf, orphanOf, pageOf } from '../../api/shapes.ts';
import { ORPHANS_SETTINGS, type OrphansSetting, OrphansSettingSchema } from '../../domain/orphans.ts';
import type { PreemptionSettings } from '../../domain/preemption.ts';
import { pageTable } from '../format.ts';
import { later } from '../later.ts';
import { addPageOptions, addStateOptions, addWaitOptions, stateFilter, type StateListOptions, type WaitOptions } from '../options.ts';
import { BlueprintRef as BlueprintRefArg } from '../../api/schemas.ts';
import {
  BlueprintStateArg,
  countBetween,
  DriverName,
  Duration,
  DurationOrOff,
  JsonObject,
  LabelArg,
  OnOff,
  parseWith,
  PreemptionArg,
  Setting,
} from '../parsers.ts';
import { withOldNames } from '../oldNames.ts';
import { requestCommand } from '../requestCommand.ts';
import { withSession } from '../session.ts';
import { localTransportOf } from '../transport/withTransport.ts';
import { BLUEPRINT_COLUMNS, renderBlueprint, renderBlueprintDetail, renderOrphans } from '../views/blueprintViews.ts';

/** What `blueprint create` and `blueprint limits` both set, and read alike. */
interface SharedOptions {
  readonly cleanBetweenLeases?: boolean;
  readonly cleanAttempts?: number;
  /** Milliseconds, or `off`. */
  readonly priorityStep?: number | 'off';
  /** Milliseconds. */
  readonly fairShareHalfLife?: number;
  readonly preemption?: PreemptionSettings | 'off';
  /** From repeated --label key=value. */
  readonly label?: Record<string, string>;
  readonly orphans?: OrphansSetting;
}

interface CreateOptions extends SharedOptions {
  readonly name: string;
  readonly driver: string;
  readonly maxResources: number;
  readonly leasesPerResource: number;
  readonly minResources: number;
  /** Milliseconds. */
  readonly idleTimeout?: number;
  /** Milliseconds. */
  readonly checkInterval?: number;
  /** Milliseconds. */
  readonly maxHold?: number;
  readonly settings?: Record<string, unknown>;
  /** From repeated --setting key=value. */
  readonly setting?: Record<string, unknown>;
}

/** A limit left out is left as it is; `off` turns one off. */
interface LimitsOptions extends SharedOptions {
  readonly maxResources?: number;
  readonly leasesPerResource?: number;
  /** Milliseconds, or `off`. */
  readonly checkInterval?: number | 'off';
  /** Milliseconds, or `off`. */
  readonly maxHold?: number | 'off';
}

interface UpdateOptions extends WaitOptions {
  readonly settings?: Record<string, unknown>;
  readonly setting?: Record<string, unknown>;
}

/** Creating and changing blueprints (their checks, commands and metrics) is loaded by the subcommands that do it. */
const createBlueprint = later(() => import('../../objects/createBlueprint.ts'), 'createBlueprint');
const blueprintChanges = () => import('../../objects/updateBlueprint.ts');
const setBlueprintState = later(blueprintChanges, 'setBlueprintState');
/** The database's reads, by the subcommands that read: every call, remote ones too, declares these subcommands. */
const blueprintReads = () => import('../../read/blueprints.ts');
const findBlueprint = later(blueprintReads, 'findBlueprint');
const listBlueprints = later(blueprintReads, 'listBlueprints');
const readBlueprintDetail = later(blueprintReads, 'readBlueprintDetail');
const readOrphans = later(() => import('../../read/orphans.ts'), 'readOrphans');

const parseSetting = parseWith(Setting);

/** Collects repeated `--label key=value` into one map; the values stay text (checked with the blueprint). */
function collectLabel(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const [key, label] = parseWith(LabelArg)(value);
  return { ...previous, [key]: label };
}

/** `blueprint create` and `blueprint limits` take the same repeatable --label. */
const LABEL_OPTION = [
  '--label <key=value>',
  "a label every resource of the blueprint carries, which lease selectors match (repeatable; on limits, the labels given replace the blueprint's)",
  collectLabel,
] as const;

/** Collects repeated `--setting key=value` into one object. */
function collectSetting(value: string, previous: Record<string, unknown> = {}): Record<string, unknown> {
  const [key, parsed] = parseSetting(value);
  return { ...previous, [key]: parsed };
}

/** `blueprint create` and `blueprint limits` take the same --orphans. */
const ORPHANS_OPTION = [
  '--orphans <report|destroy>',
  `what the collector does with what the driver lists that no resource stands for: ${Object.entries(ORPHANS_SETTINGS)
    .map(([value, meaning]) => `${value}: ${meaning}`)
    .join('; ')}`,
  parseWith(OrphansSettingSchema),
] as const;

/** The commands without a payload that an operator queues on a blueprint, as data: verb, command kind, what it does. */
const QUEUED = [
  ['top-up', 'top_up', 'make resources until the warm minimum (--min-resources) is active, within the limit'],
  [
    'cordon',
    'cordon',
    'put every active resource of the blueprint into maintenance: no new lease lands on them, their leases carry on; ' +
      'the blueprint still makes new resources for waiting leases (disable it too to stop that)',
  ],
  ['uncordon', 'uncordon', 'take every resource of the blueprint in maintenance back into service'],
] as const;

export function addBlueprintCommands(program: Command): void {
  const blueprint = program.command('blueprint').description('blueprints: named, configured pools of resources');

  blueprint
    .command('create')
    .description('create a blueprint (nothing is allocated until a lease asks)')
    .requiredOption('--name <name>', 'lower-case letters, digits, ".", "_" or "-"')
    .requiredOption('--driver <driver>', `one of: ${DriverName.options.join(', ')}`, parseWith(DriverName))
    .requiredOption('--max-resources <n>', 'at most this many resources at once', parseWith(countBetween(1, 100_000)))
    .option('--leases-per-resource <n>', 'lease slots on each resource', parseWith(countBetween(1, 10_000)), 1)
    .option('--min-resources <n>', 'warm minimum: active resources the collector keeps ready', parseWith(countBetween(0, 100_000)), 0)
    .option('--idle-timeout <duration>', 'reclaim idle resources beyond the minimum after this long, e.g. 15m', parseWith(Duration))
    .option('--check-interval <duration>', 'ask the driver this often whether each resource is still there and healthy, e.g. 5m', parseWith(Duration))
    .option('--clean-between-leases', 'have the driver clean each slot a lease gives back before another lease may have it')
    .option('--clean-attempts <n>', 'failed cleanings in a row that quarantine a resource', parseWith(countBetween(1, 100)), 3)
    .option(...PRIORITY_STEP_OPTION)
    .option(
      '--max-hold <duration>',
      'the longest a lease may be held, from its grant to its end, renewals included, e.g. 2h (default: no limit)',
      parseWith(Duration),
    )
    .option(...HALF_LIFE_OPTION)
    .option(...PREEMPTION_OPTION)
    .option(...LABEL_OPTION)
    .option(...ORPHANS_OPTION)
    .option('--settings <json>', 'driver settings as a JSON object', parseWith(JsonObject))
    .option('--setting <key=value>', 'one driver setting (repeatable; JSON values allowed; overrides --settings)', collectSetting)
    .action((options: CreateOptions, command: Command) =>
      withSession(command, async ({ db, out }) => {
        // The options named as the blueprint's fields pass as they are; durations become milliseconds.
        const { idleTimeout, checkInterval, priorityStep, maxHold, fairShareHalfLife, preemption, settings, setting, label, ...named } = options;
        const input = {
          ...named,
          labels: label,
          settings: { ...settings, ...setting },
          idleTimeoutMs: idleTimeout,
          checkIntervalMs: checkInterval,
          priorityStepMs: stepMs(priorityStep),
          maxHoldMs: maxHold,
          fairShareHalfLifeMs: fairShareHalfLife,
          ...(preemption === undefined || preemption === 'off' ? {} : { preemption }),
        };
        const created = blueprintOf(await createBlueprint(db, input, cliActor()));
        out.result(created, (b) => `created ${renderBlueprint(b)}`);
      }),
    );

  addWaitOptions(
    blueprint
      .command('update')
      .description("replace a blueprint's driver settings; its resources are reconciled with them (waits until done)")
      .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg))
      .option('--settings <json>', 'the new driver settings as a JSON object (default: the current ones)', parseWith(JsonObject))
      .option('--setting <key=value>', 'change one driver setting (repeatable; JSON values allowed; applied over --settings)', collectSetting),
  ).action((ref: BlueprintRef, options: UpdateOptions, command: Command) =>
    withSession(command, async (session) => {
      if (!options.settings && !options.setting) throw new InvalidInputError('give the new settings with --settings <json> or --setting <key=value>');
      const found = await findBlueprint(session.db, ref);
      const settings = { ...(options.settings ?? (found.settings as Record<string, unknown>)), ...options.setting };
      const request = { target: { kind: 'blueprint', id: found.id }, kind: 'update_settings', payload: { settings } } as const;
      await requestCommand(await localTransportOf(session), session.out, request, options);
    }),
  );

  const queued = QUEUED.map(([verb, kind, description]) => ({ verb, kind, description }));
  for (const { verb, kind, description, notice } of withOldNames('blueprint', queued)) {
    addWaitOptions(
      blueprint
        .command(verb, { hidden: notice !== undefined })
        .description(`${description} (waits until done)`)
        .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg)),
    ).action((ref: BlueprintRef, options: WaitOptions, command: Command) =>
      withSession(command, async (session) => {
        if (notice) session.out.warn(notice);
        const { id } = await findBlueprint(session.db, ref);
        await requestCommand(await localTransportOf(session), session.out, { target: { kind: 'blueprint', id }, kind }, options);
      }),
    );
  }

  blueprint
    .command('limits')
    .description("change a blueprint's limits (applied at once; room they make goes to waiting leases)")
    .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg))
    .option('--max-resources <n>', 'at most this many resources at once', parseWith(countBetween(1, 100_000)))
    .option('--leases-per-resource <n>', 'lease slots on each resource made from now on', parseWith(countBetween(1, 10_000)))
    .option('--check-interval <duration|off>', 'check each resource this often (e.g. 5m), or off', parseWith(DurationOrOff))
    .option('--clean-between-leases <on|off>', 'clean each slot a lease gives back from now on, or stop', parseWith(OnOff))
    .option('--clean-attempts <n>', 'failed cleanings in a row that quarantine a resource', parseWith(countBetween(1, 100)))
    .option(...PRIORITY_STEP_OPTION)
    .option('--max-hold <duration|off>', 'the longest a lease granted from now on may be held (e.g. 2h), or off', parseWith(DurationOrOff))
    .option(...HALF_LIFE_OPTION)
    .option(...PREEMPTION_OPTION)
    .option(...LABEL_OPTION)
    .option(...ORPHANS_OPTION)
    .action((ref: BlueprintRef, options: LimitsOptions, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const { updateBlueprint } = await blueprintChanges();
        const { checkInterval, priorityStep, maxHold, fairShareHalfLife, preemption, label, ...limits } = options;
        const changes = {
          ...limits,
          ...(checkInterval === undefined ? {} : { checkIntervalMs: checkInterval === 'off' ? null : checkInterval }),
          ...(priorityStep === undefined ? {} : { priorityStepMs: stepMs(priorityStep) }),
          ...(maxHold === undefined ? {} : { maxHoldMs: maxHold === 'off' ? null : maxHold }),
          ...(preemption === undefined ? {} : { preemption: preemption === 'off' ? null : preemption }),
          ...(fairShareHalfLife === undefined ? {} : { fairShareHalfLifeMs: fairShareHalfLife }),
          ...(label === undefined ? {} : { labels: label }),
        };
        if (Object.keys(changes).length === 0) {
          throw new InvalidInputError(
            'give at least one of --max-resources <n>, --leases-per-resource <n>, --check-interval <duration|off>, --clean-between-leases <on|off>, --clean-attempts <n>, --priority-step <duration|off>, --max-hold <duration|off>, --fair-share-half-life <duration>, --preemption <on|off|settings>, --label <key=value>, --orphans <report|destroy>',
          );
        }
        const changed = blueprintOf(await withTransaction(db, (trx) => updateBlueprint(trx, ref, changes, cliActor())));
        out.result(changed, (b) => `changed ${renderBlueprint(b)}`);
      }),
    );

  for (const [verb, state, what] of [
    ['disable', 'disabled', 'take no new leases (leases it has carry on; waiting ones keep waiting)'],
    ['enable', 'enabled', 'take leases again (waiting ones are served from the room there is)'],
    ['archive', 'archived', 'once none of its leases and resources is live: keep it for its history, out of the lists, for good'],
  ] as const) {
    blueprint
      .command(verb)
      .description(`${verb} a blueprint: ${what}`)
      .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg))
      .action((ref: BlueprintRef, _options: unknown, command: Command) =>
        withSession(command, async ({ db, out }) => {
          const changed = blueprintOf(await withTransaction(db, (trx) => setBlueprintState(trx, ref, state, cliActor())));
          out.result(changed, (b) => `${state} ${renderBlueprint(b)}`);
        }),
      );
  }

  blueprint
    .command('orphans')
    .description("what the blueprint's driver lists that no resource stands for, as the collector's last pass found it")
    .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg))
    .action((ref: BlueprintRef, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const found = await findBlueprint(db, ref);
        const answer = { blueprint: found.name, orphans: (await readOrphans(db, found.id)).map(orphanOf) };
        out.result(answer, renderOrphans);
      }),
    );

  addWaitOptions(
    blueprint
      .command('destroy-orphan')
      .description('have the driver destroy an orphan the collector recorded (`blueprint orphans` lists them; waits until done)')
      .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg))
      .argument('<orphan>', "the orphan's id, as listed"),
  ).action((ref: BlueprintRef, orphan: string, options: WaitOptions, command: Command) =>
    withSession(command, async (session) => {
      const { id } = await findBlueprint(session.db, ref);
      const request = { target: { kind: 'blueprint', id }, kind: 'destroy_orphan', payload: { orphan } } as const;
      await requestCommand(await localTransportOf(session), session.out, request, options);
    }),
  );

  blueprint
    .command('show')
    .description("a blueprint's fields, usage, queue and timeline")
    .argument('<name|id>', 'blueprint name or id', parseWith(BlueprintRefArg))
    .action((ref: BlueprintRef, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const found = await readBlueprintDetail(db, ref);
        const detail = { blueprint: blueprintDetailOf(found), ...historyOf(await readHistory(db, { kind: 'blueprint', id: found.id })) };
        out.result(detail, renderBlueprintDetail);
      }),
    );

  addPageOptions(
    addStateOptions(
      blueprint.command('list').description('blueprints, newest first; live ones unless --all or --state'),
      'blueprints',
      BlueprintStateArg,
    ),
  ).action((options: StateListOptions, command: Command) =>
    withSession(command, async ({ db, out }) => {
      const page = pageOf(await listBlueprints(db, { ...options, state: stateFilter(options) }), listedBlueprintOf);
      out.result(page, (p) => pageTable(p, BLUEPRINT_COLUMNS));
    }),
  );
}

/** `blueprint create` and `blueprint limits` take the same --priority-step. */
const PRIORITY_STEP_OPTION = [
  '--priority-step <duration|off>',
  "how much waiting one level of a lease's priority is worth in the line (default 1m), or off",
  parseWith(DurationOrOff),
] as const;

/** `blueprint create` and `blueprint limits` take the same --preemption. */
const PREEMPTION_OPTION = [
  '--preemption <on|off|settings>',
  'take slots back from active leases for waiting leases of higher priority: on (the defaults), off, or margin=<levels>,min-runtime=<duration>,grace=<duration>,protected=<leases per team>, e.g. margin=3,grace=2m',
  parseWith(PreemptionArg),
] as const;

/** `blueprint create` and `blueprint limits` take the same --fair-share-half-life. */
const HALF_LIFE_OPTION = [
  '--fair-share-half-life <duration>',
  'how fast what a team used at the blueprint is forgotten, for fair share (default 1h)',
  parseWith(Duration),
] as const;

/** A --priority-step as stored: `off` is 0 (priorities do not count); absent leaves the default. */
function stepMs(step: number | 'off' | undefined): number | undefined {
  return step === 'off' ? 0 : step;
}
