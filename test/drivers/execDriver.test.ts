import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type LeaseCall, PermanentDriverError, type ResourceCall, TransientDriverError } from '../../src/drivers/Driver.ts';
import { ExecDriver, STDERR_KEPT_BYTES } from '../../src/drivers/ExecDriver.ts';
import { validateDriverSettings } from '../../src/drivers/registry.ts';
import { validatingDriver } from '../../src/drivers/validatingDriver.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { MISBEHAVE } from './execFixtures.ts';

// The exec driver on its own, running real programs: what goes in (argv,
// stdin, environment, working directory) and how each way a program can end
// comes out.
const noServices = { query: async () => undefined };
let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'slipway-exec-'));
});
afterAll(async () => rm(scratch, { recursive: true, force: true }));

const EVIL = `x'; touch pwned; echo "$(touch pwned2)" \`touch pwned3\` && rm -rf ~ #`;
const resourceCall: ResourceCall = {
  blueprint: { id: 1, name: 'ws', settings: { note: EVIL }, labels: {} },
  idempotencyKey: 'resource:5:11',
  commandId: 11,
  resource: { id: 5, capacity: 1, attributes: { label: EVIL } },
};
const leaseCall: LeaseCall = {
  blueprint: { id: 1, name: 'ws', settings: {}, labels: {} },
  idempotencyKey: 'lease:9:12',
  commandId: 12,
  lease: { id: 9, holder: EVIL, attributes: {} },
  resource: { id: 5, attributes: { label: EVIL } },
  slot: 0,
};

/** A driver whose every step runs `argv`, with settings validated as a blueprint's would be. */
function exec(settings: Record<string, unknown>) {
  return validatingDriver(ExecDriver.create(validateDriverSettings('exec', settings) as never, noServices));
}
const misbehave = (behaviour: string, extra: Record<string, unknown> = {}) =>
  exec({ commands: { allocateResource: ['/bin/sh', MISBEHAVE, behaviour] }, ...extra });

/** A node program that prints back, as attributes, what it was given. */
async function echoProgram(): Promise<string> {
  const file = path.join(scratch, 'echo.mjs');
  await writeFile(
    file,
    `let input = '';
     for await (const chunk of process.stdin) input += chunk;
     const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_')));
     process.stdout.write(JSON.stringify({ attributes: { input: JSON.parse(input), argv: process.argv.slice(2), env, cwd: process.cwd() } }));`,
  );
  return file;
}

describe('exec driver: what a program is given', () => {
  test('the call as JSON on stdin, attributes and holder verbatim, fixed argv, an allow-listed environment and the working directory', async () => {
    const echo = await echoProgram();
    process.env.SLIPWAY_TEST_SECRET = 'must not leak';
    const driver = exec({
      commands: { allocateResource: [process.execPath, echo, 'allocate', '$HOME'], acquireLease: [process.execPath, echo, 'acquire'] },
      cwd: scratch,
      env: { REGION: 'eu-1' },
      passEnv: ['PATH'],
    });
    const allocated = (await driver.allocateResource(resourceCall)).attributes as any;
    expect(allocated.input).toEqual({ operation: 'allocateResource', ...resourceCall });
    expect(allocated.argv).toEqual(['allocate', '$HOME']);
    expect(allocated.cwd).toBe(scratch);
    expect(allocated.env).toEqual({
      PATH: process.env.PATH,
      REGION: 'eu-1',
      SLIPWAY_OPERATION: 'allocateResource',
      SLIPWAY_IDEMPOTENCY_KEY: 'resource:5:11',
    });

    const acquired = (await driver.acquireLease(leaseCall)).attributes as any;
    expect(acquired.input.lease.holder).toBe(EVIL);
    expect(acquired.input.resource.attributes.label).toBe(EVIL);
    for (const marker of ['pwned', 'pwned2', 'pwned3']) expect(existsSync(path.join(scratch, marker))).toBe(false);
  });

  test('an operation with no command succeeds without running anything', async () => {
    await expect(misbehave('fail').activateLease(leaseCall)).resolves.toEqual({});
  });
});

describe('exec driver: how a program ends', () => {
  test('exit 0 with a JSON result: its attributes', async () => {
    await expect(misbehave('ok').allocateResource(resourceCall)).resolves.toEqual({ attributes: { ok: true } });
  });

  test('a non-zero exit is permanent, with the end of stderr in the message', async () => {
    const failure = misbehave('fail').allocateResource(resourceCall);
    await expect(failure).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(failure).rejects.toThrow(
      /allocateResource: \/bin\/sh exited with code 3 \(permanent failure\); stderr: provisioning failed: flavour m5.huge does not exist/,
    );
  });

  test('exit 75 (EX_TEMPFAIL), or any code listed as transient, is transient', async () => {
    await expect(misbehave('busy').allocateResource(resourceCall)).rejects.toBeInstanceOf(TransientDriverError);
    await expect(misbehave('busy').allocateResource(resourceCall)).rejects.toThrow(
      /exited with code 75 \(transient failure\); stderr: quota exceeded/,
    );
    const listed = misbehave('fail', { transientExitCodes: [3] }).allocateResource(resourceCall);
    await expect(listed).rejects.toBeInstanceOf(TransientDriverError);
  });

  test('invalid JSON on stdout is permanent and shows what was printed', async () => {
    const failure = misbehave('garbage').allocateResource(resourceCall);
    await expect(failure).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(failure).rejects.toThrow(/printed invalid JSON on stdout: "this is not JSON\\n"; stderr: warming up.../);
  });

  test('JSON that is not a driver result is refused by the shared output check', async () => {
    const program = path.join(scratch, 'wrong-shape.sh');
    await writeFile(program, `cat >/dev/null; echo '{"attributes": "a string"}'`);
    const failure = exec({ commands: { destroyResource: ['/bin/sh', program] } }).destroyResource(resourceCall);
    await expect(failure).rejects.toThrow(/destroyResource returned invalid output: attributes/);
  });

  test('only the last 4 KiB of stderr is kept', async () => {
    const failure = await misbehave('noisy')
      .allocateResource(resourceCall)
      .catch((error: Error) => error);
    const stderr = (failure as Error).message.split('; stderr: ')[1]!;
    expect(stderr.startsWith('…')).toBe(true);
    expect(Buffer.byteLength(stderr)).toBeLessThanOrEqual(STDERR_KEPT_BYTES + 3);
    expect(stderr.endsWith('the real reason is at the end')).toBe(true);
    expect(stderr).not.toContain('noise line 0\n');
  });

  test('a program past its timeout is stopped with its whole process group, even one ignoring SIGTERM', async () => {
    const pidFile = path.join(scratch, 'hang.pids');
    const driver = misbehave('hang', { timeoutMs: 3000, killGraceMs: 500, env: { PID_FILE: pidFile } });
    const failure = driver.allocateResource(resourceCall);
    await expect(failure).rejects.toBeInstanceOf(TransientDriverError);
    await expect(failure).rejects.toThrow(/timed out after 3s and was stopped; stderr: hanging on purpose/);
    const pids = (await readFile(pidFile, 'utf8')).trim().split(' ').map(Number);
    expect(pids).toHaveLength(2);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await waitFor('the script and its child to be gone', async () => pids.every((pid) => !alive(pid)));
  });

  test('a program that exits leaving a child holding its pipes: its own result counts, not the child', async () => {
    const pidFile = path.join(scratch, 'leave-child.pid');
    const driver = misbehave('leave-child', { timeoutMs: 120_000, env: { PID_FILE: pidFile } });
    try {
      await expect(driver.allocateResource(resourceCall)).resolves.toEqual({ attributes: { left: 'a child' } });
    } finally {
      process.kill(Number((await readFile(pidFile, 'utf8')).trim()), 'SIGKILL');
    }
  });

  test('a program that cannot be started is permanent', async () => {
    const failure = exec({ commands: { allocateResource: [path.join(scratch, 'no-such-program')] } }).allocateResource(resourceCall);
    await expect(failure).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(failure).rejects.toThrow(/could not be started: spawn .*no-such-program ENOENT/);
  });
});

describe('exec driver: settings', () => {
  test('are validated with messages naming the field', () => {
    expect(() => validateDriverSettings('exec', {})).toThrow(/settings.commands/);
    expect(() => validateDriverSettings('exec', { commands: {} })).toThrow(/give a command for at least one operation/);
    expect(() => validateDriverSettings('exec', { commands: { allocateResource: 'rm -rf /' } })).toThrow(/settings.commands.allocateResource/);
    expect(() => validateDriverSettings('exec', { commands: { allocateResource: [] } })).toThrow(/give the program and its arguments/);
    expect(() => validateDriverSettings('exec', { commands: { makeCoffee: ['x'] } })).toThrow(/commands/);
    expect(() => validateDriverSettings('exec', { commands: { allocateResource: ['x'] }, cwd: 'relative' })).toThrow(/cwd must be an absolute path/);
    expect(() => validateDriverSettings('exec', { commands: { allocateResource: ['x'] }, env: { 'BAD NAME': 'x' } })).toThrow(
      /environment variable name/,
    );
    expect(() => validateDriverSettings('exec', { commands: { allocateResource: ['x'] }, transientExitCodes: [0] })).toThrow(/transientExitCodes/);
    expect(validateDriverSettings('exec', { commands: { allocateResource: ['x'] } })).toMatchObject({
      timeoutMs: 60_000,
      transientExitCodes: [75],
      passEnv: ['PATH', 'HOME', 'LANG', 'TZ', 'TMPDIR'],
    });
  });
});

describe('exec driver: the optional checkResource and cleanSlot', () => {
  const slotCall = { ...resourceCall, idempotencyKey: 'resource:5:13', commandId: 13, slot: 1 };

  test('without a program for them, the driver has neither: its resources are never checked, its slots never cleaned', () => {
    const driver = exec({ commands: { allocateResource: ['/bin/true'] } });
    expect(driver.cleanSlot).toBeUndefined();
    expect(driver.checkResource).toBeUndefined();
  });

  test('cleanSlot runs its program with the call on stdin (the slot, the resource, the key) and the key in the environment', async () => {
    const echo = await echoProgram();
    const driver = exec({ commands: { cleanSlot: [process.execPath, echo, 'clean'] }, passEnv: [] });
    const cleaned = (await driver.cleanSlot!(slotCall)).attributes as any;
    expect(cleaned.input).toEqual({ operation: 'cleanSlot', ...slotCall });
    expect(cleaned.argv).toEqual(['clean']);
    expect(cleaned.env).toEqual({ SLIPWAY_OPERATION: 'cleanSlot', SLIPWAY_IDEMPOTENCY_KEY: 'resource:5:13' });
    // A repeat of the same call (calls are at least once) gets the same key.
    const again = (await driver.cleanSlot!(slotCall)).attributes as any;
    expect(again.input.idempotencyKey).toBe('resource:5:13');
  });

  test('cleanSlot ends as every step does: exit 75 is transient, another code permanent, with the end of stderr', async () => {
    const busy = exec({ commands: { cleanSlot: ['/bin/sh', MISBEHAVE, 'busy'] } }).cleanSlot!(slotCall);
    await expect(busy).rejects.toBeInstanceOf(TransientDriverError);
    await expect(busy).rejects.toThrow(/^cleanSlot: \/bin\/sh exited with code 75 \(transient failure\); stderr: quota exceeded/);
    const failing = exec({ commands: { cleanSlot: ['/bin/sh', MISBEHAVE, 'fail'] } }).cleanSlot!(slotCall);
    await expect(failing).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(failing).rejects.toThrow(/^cleanSlot: \/bin\/sh exited with code 3 \(permanent failure\)/);
  });

  test('checkResource: nothing printed is healthy; a printed answer is read; an answer of another shape is a permanent failure', async () => {
    const answering = async (stdout: string) => {
      const program = path.join(scratch, `probe-${Math.random().toString(36).slice(2)}.sh`);
      await writeFile(program, `cat >/dev/null; printf '%s' '${stdout}'`);
      return exec({ commands: { checkResource: ['/bin/sh', program] } }).checkResource!(resourceCall);
    };
    await expect(answering('')).resolves.toEqual({ health: 'healthy' });
    await expect(answering('{"health": "gone", "message": "host decommissioned"}')).resolves.toEqual({
      health: 'gone',
      message: 'host decommissioned',
    });
    const wrong = answering('{"health": "dead"}');
    await expect(wrong).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(wrong).rejects.toThrow(/^checkResource returned invalid output: health/);
    const garbled = exec({ commands: { checkResource: ['/bin/sh', MISBEHAVE, 'garbage'] } }).checkResource!(resourceCall);
    await expect(garbled).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(garbled).rejects.toThrow(/^checkResource: \/bin\/sh printed invalid JSON on stdout: "this is not JSON\\n"/);
  });

  test('listResources gets the blueprint alone and answers a checked listing; destroyOrphan gets the orphan; neither is there without a program', async () => {
    const program = path.join(scratch, 'list.mjs');
    await writeFile(
      program,
      `let input = '';
       for await (const chunk of process.stdin) input += chunk;
       const call = JSON.parse(input);
       if (call.operation === 'listResources') {
         const keyed = process.env.SLIPWAY_IDEMPOTENCY_KEY !== undefined;
         process.stdout.write(JSON.stringify({ resources: [{ id: 'vm-1', resourceId: 5 }, { id: 'vm-2', attributes: { call: Object.keys(call).sort().join(','), keyed } }] }));
       } else if (call.operation === 'destroyOrphan') {
         process.stdout.write(JSON.stringify({ attributes: { removed: call.orphan.id } }));
       }`,
    );
    const driver = exec({ commands: { listResources: ['node', program], destroyOrphan: ['node', program] } });
    await expect(driver.listResources!({ blueprint: resourceCall.blueprint })).resolves.toEqual({
      resources: [
        { id: 'vm-1', resourceId: 5, attributes: {} },
        { id: 'vm-2', attributes: { call: 'blueprint,operation', keyed: false } },
      ],
    });
    const orphan = { id: 'vm-2', attributes: {} };
    await expect(driver.destroyOrphan!({ ...resourceCall, orphan })).resolves.toEqual({ attributes: { removed: 'vm-2' } });

    // A listing of another shape is refused, as any driver output is.
    const listedWrong = exec({ commands: { listResources: ['/bin/sh', '-c', `cat >/dev/null; echo '{"resources": [{"id": ""}]}'`] } });
    await expect(listedWrong.listResources!({ blueprint: resourceCall.blueprint })).rejects.toThrow(
      /^listResources returned invalid output: resources\.0\.id/,
    );
    const without = exec({ commands: { allocateResource: ['node', program] } });
    expect(without.listResources).toBeUndefined();
    expect(without.destroyOrphan).toBeUndefined();
  });

  test("listSlots gets the blueprint and the resource and answers a checked listing of the resource's slots; not there without a program", async () => {
    const program = path.join(scratch, 'slots.mjs');
    await writeFile(
      program,
      `let input = '';
       for await (const chunk of process.stdin) input += chunk;
       const call = JSON.parse(input);
       process.stdout.write(JSON.stringify({ slots: [{ id: 'r' + call.resource.id + '-s1', slot: 1 }, { id: Object.keys(call).sort().join(','), slot: 3 }] }));`,
    );
    const listCall = { blueprint: resourceCall.blueprint, resource: resourceCall.resource };
    await expect(exec({ commands: { listSlots: ['node', program] } }).listSlots!(listCall)).resolves.toEqual({
      slots: [
        { id: `r${resourceCall.resource.id}-s1`, slot: 1 },
        { id: 'blueprint,operation,resource', slot: 3 },
      ],
    });
    const twice = exec({
      commands: { listSlots: ['/bin/sh', '-c', `cat >/dev/null; echo '{"slots": [{"id": "a", "slot": 1}, {"id": "b", "slot": 1}]}'`] },
    });
    await expect(twice.listSlots!(listCall)).rejects.toThrow(
      /^listSlots returned invalid output: slots: each listed slot must have a number of its own/,
    );
    expect(exec({ commands: { allocateResource: ['node', program] } }).listSlots).toBeUndefined();
  });
});
