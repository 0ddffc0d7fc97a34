import type { Command } from 'commander';
import { expect, test } from 'vitest';
import { z } from 'zod';
import { OPERATIONS, type Operation } from '../../src/api/contract.ts';
import { buildProgram } from '../../src/cli/program.ts';

/**
 * Every change the API can make, the CLI can make too: each operation that
 * is not a GET, and for the routes that queue commands each kind they accept
 * from outside (their body's `kind`), mapped to the `slipway` subcommand that
 * does it. A new route or requestable kind without a row here fails, and so
 * does a row whose subcommand the program does not have.
 */
const CLI_FOR: Readonly<Record<string, string>> = {
  createBlueprint: 'blueprint create',
  updateBlueprint: 'blueprint limits',
  disableBlueprint: 'blueprint disable',
  enableBlueprint: 'blueprint enable',
  archiveBlueprint: 'blueprint archive',
  createLease: 'lease create',
  'queueLeaseCommand release': 'lease release',
  'queueLeaseCommand renew': 'lease renew',
  'queueResourceCommand release': 'resource release',
  'queueResourceCommand reclaim': 'resource reclaim',
  'queueResourceCommand retire': 'resource retire',
  'queueResourceCommand cordon': 'resource cordon',
  'queueResourceCommand uncordon': 'resource uncordon',
  // Old names (decision 0036): hidden from help, still there.
  'queueResourceCommand drain': 'resource drain',
  'queueResourceCommand undrain': 'resource undrain',
  'queueResourceCommand check': 'resource check',
  'queueResourceCommand repair': 'resource repair',
  // An orphaned slot is freed by its resource; the CLI asks its blueprint, which hands it on.
  'queueResourceCommand destroy_orphan': 'blueprint destroy-orphan',
  'queueBlueprintCommand update_settings': 'blueprint update',
  'queueBlueprintCommand top_up': 'blueprint top-up',
  'queueBlueprintCommand cordon': 'blueprint cordon',
  'queueBlueprintCommand uncordon': 'blueprint uncordon',
  'queueBlueprintCommand drain': 'blueprint drain',
  'queueBlueprintCommand undrain': 'blueprint undrain',
  'queueBlueprintCommand destroy_orphan': 'blueprint destroy-orphan',
  cancelCommand: 'command cancel',
  setTeam: 'team set',
  setQuota: 'team quota',
  removeQuota: 'team unquota',
  createReservation: 'reservation create',
  cancelReservation: 'reservation cancel',
};

/** "operationId", or "operationId kind" for each kind a command-queueing operation accepts. */
function mutatingRequests(): string[] {
  return Object.values(OPERATIONS as Record<string, Operation>)
    .filter((operation) => operation.method !== 'GET')
    .flatMap((operation) => {
      const kind = operation.body instanceof z.ZodObject ? operation.body.shape.kind : undefined;
      return kind instanceof z.ZodEnum ? kind.options.map((k) => `${operation.operationId} ${String(k)}`) : [operation.operationId];
    });
}

/** The subcommand at `path` ("blueprint top-up"), if the program has it. */
function subcommand(program: Command, path: string): Command | undefined {
  let at: Command | undefined = program;
  for (const name of path.split(' ')) at = at?.commands.find((c) => c.name() === name);
  return at;
}

test('every operation of the API that changes something, and every kind it queues from outside, has a CLI command', () => {
  const requests = mutatingRequests();
  // The table is read from the contract: the queueing routes' kinds are there.
  expect(requests).toEqual(expect.arrayContaining(['cancelCommand', 'queueBlueprintCommand top_up', 'queueLeaseCommand renew']));
  expect(requests.filter((request) => !Object.hasOwn(CLI_FOR, request))).toEqual([]);
  // And no row outlives its operation.
  expect(Object.keys(CLI_FOR).filter((request) => !requests.includes(request))).toEqual([]);
});

test("each of those CLI commands is one of the program's subcommands", async () => {
  const program = await buildProgram();
  const missing = Object.values(CLI_FOR).filter((path) => {
    const found = subcommand(program, path);
    // A group (e.g. `slipway lease`) is not a command that does something.
    return !found || found.commands.length > 0;
  });
  expect(missing).toEqual([]);
  expect(subcommand(program, 'command explode')).toBeUndefined();
});
