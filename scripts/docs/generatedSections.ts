import { z } from 'zod';
import { ConfigSchema } from '../../src/config.ts';
import { COMMAND_KINDS, type CommandKindSpec } from '../../src/domain/commandKinds.ts';
import { INITIAL_STATE, LIFECYCLES, READY_STATE, type StateFlag, type StateSpec } from '../../src/domain/lifecycle.ts';
import { renderBenchmarkBars, renderBenchmarkFigures, renderStartupFigures, renderTimelinessFigures } from './benchmarkFigures.ts';
import { escapeCell as cell, markdownTable as table } from './markdownTable.ts';

/**
 * The parts of docs/ (and the README) written from the code (the benchmark's table: from its
 * committed results) rather than by hand, each between
 * `<!-- generated: NAME -->` and `<!-- end generated: NAME -->` in one page.
 * `npm run docs` rewrites them; test/docs/generatedDocs.test.ts fails when a
 * committed page differs from what this would write now.
 */
export const GENERATED_SECTIONS: Record<string, { page: string; render: () => string | Promise<string> }> = {
  'state-table': { page: 'docs/concepts.md', render: renderStateTables },
  'command-kinds': { page: 'docs/concepts.md', render: renderCommandKinds },
  configuration: { page: 'docs/operations.md', render: renderConfiguration },
  // From the committed runs in bench/results/ (npm run bench:publish).
  'benchmark-figures': { page: 'docs/benchmark.md', render: renderBenchmarkFigures },
  'benchmark-bars': { page: 'README.md', render: renderBenchmarkBars },
  // From the committed runs in bench/results/timeliness/ (bench/runTimeliness.ts).
  'benchmark-timeliness': { page: 'docs/benchmark.md', render: renderTimelinessFigures },
  // From bench/results/startup/figures.json (npm run bench:startup -- --publish).
  'startup-figures': { page: 'docs/benchmark.md', render: renderStartupFigures },
};

const code = (text: string) => `\`${text}\``;

/** `active` (new, ready): a state with what it is to its kind. */
function stateName(state: string, roles: string[]): string {
  const named = roles.filter(Boolean);
  return named.length === 0 ? code(state) : `${code(state)} (${named.join(', ')})`;
}

/** How the state table's yes/no facts head their columns (every flag of StateSpec has one). */
const FLAG_HEADERS: Record<StateFlag, string> = {
  isSettingUp: 'setting up',
  holdsSlot: 'holds a slot',
  takesLeases: 'takes new leases',
  grantsSlots: 'grants slots',
};

/**
 * One table per object kind: each state, where it may move, which commands
 * it accepts (callers' kinds in bold), a column for each flag some state of
 * the kind has, and its tone.
 */
function renderStateTables(): string {
  return Object.entries(LIFECYCLES)
    .map(([name, states]) => {
      const kind = name as keyof typeof LIFECYCLES;
      const kinds: Record<string, CommandKindSpec> = COMMAND_KINDS[kind];
      const specs = Object.entries(states as Record<string, StateSpec>);
      const flags = (Object.keys(FLAG_HEADERS) as StateFlag[]).filter((flag) => specs.some(([, spec]) => spec[flag]));
      const rows = specs.map(([state, spec]) => [
        stateName(state, [state === INITIAL_STATE[kind] ? 'new' : '', state === READY_STATE[kind] ? 'ready' : '']),
        spec.next.length === 0 ? '(final)' : spec.next.map(code).join(', '),
        spec.accepts.map((k) => (kinds[k]?.internal === false ? `**${k}**` : k)).join(', '),
        ...flags.map((flag) => (spec[flag] ? 'yes' : '')),
        spec.tone,
      ]);
      return `**${kind}**\n\n${table(['state', 'moves to', 'accepts', ...flags.map((flag) => FLAG_HEADERS[flag]), 'tone'], rows)}`;
    })
    .join('\n\n');
}

/** Every command kind, per object kind: whether callers may request it, what it does, how it is queued. */
function renderCommandKinds(): string {
  const rows = Object.entries(COMMAND_KINDS).flatMap(([target, kinds]) =>
    Object.entries(kinds as Record<string, CommandKindSpec>).map(([kind, spec]) => {
      const queueing = [
        spec.preempts ? 'preempts older work' : '',
        spec.supersedes ? `cancels queued ${spec.supersedes.join(', ')}` : '',
        spec.dedupKey ? 'a duplicate joins the one queued' : '',
      ].filter(Boolean);
      const goal = spec.goal ? code(spec.goal) : '';
      return [target, code(kind), spec.internal ? 'internal' : '**callers**', cell(spec.summary), goal, queueing.join('; ')];
    }),
  );
  return table(['object', 'command', 'sent by', 'what it does', 'leads to', 'queueing'], rows);
}

interface SettingSchema {
  description?: string;
  default?: unknown;
  type?: string;
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  enum?: unknown[];
}

/** Every environment variable src/config.ts reads: its default, the values it takes, and its description. */
function renderConfiguration(): string {
  const schema = z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any' }) as { properties: Record<string, SettingSchema> };
  const rows = Object.entries(schema.properties).map(([name, setting]) => {
    if (!setting.description) throw new Error(`${name} in src/config.ts has no .describe(): it is the documentation of the setting`);
    return [code(name), setting.default === undefined ? '(unset)' : code(String(setting.default)), allowedValues(setting), cell(setting.description)];
  });
  return table(['variable', 'default', 'values', 'meaning'], rows);
}

function allowedValues(setting: SettingSchema): string {
  if (setting.enum) return setting.enum.map((value) => code(String(value))).join(', ');
  if (setting.type === 'integer') return `whole number ${setting.minimum ?? (setting.exclusiveMinimum ?? 0) + 1}–${setting.maximum}`;
  if (setting.type === 'number') return `number > ${setting.exclusiveMinimum ?? setting.minimum}, ≤ ${setting.maximum}`;
  return 'text';
}
