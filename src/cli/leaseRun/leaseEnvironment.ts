import type { HeldLease } from '../../client/holdLease.ts';

/**
 * The environment `lease run` gives its command, named for shell scripts:
 * the lease and where it is, then one variable per label of the resource
 * (SLIPWAY_LABEL_<KEY>) and per attribute (SLIPWAY_ATTR_<KEY>: the
 * resource's, with the lease's over them, which carry what the driver
 * returned for the slot: a directory's path, a static-pool entry's address).
 * A key becomes upper case with every other character than A–Z and 0–9 an
 * underscore; `--json-env` has the keys as they are.
 */
export function leaseEnvironment({ lease, resource }: HeldLease): Record<string, string> {
  const env: Record<string, string> = {
    SLIPWAY_LEASE_ID: String(lease.id),
    SLIPWAY_LEASE_HOLDER: lease.holder,
    SLIPWAY_BLUEPRINT: lease.blueprintName,
    SLIPWAY_BLUEPRINT_ID: String(lease.blueprintId),
    SLIPWAY_RESOURCE_ID: String(resource.id),
    SLIPWAY_SLOT: String(lease.slot),
  };
  for (const [key, value] of Object.entries(resource.labels)) env[`SLIPWAY_LABEL_${variableName(key)}`] = value;
  for (const [key, value] of Object.entries({ ...resource.attributes, ...lease.attributes })) {
    env[`SLIPWAY_ATTR_${variableName(key)}`] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  return env;
}

/** What `--json-env` writes: the lease and its resource as the API shows them, and the variables. */
export function leaseEnvironmentJson(held: HeldLease): string {
  return `${JSON.stringify({ lease: held.lease, resource: held.resource, env: leaseEnvironment(held) }, null, 2)}\n`;
}

function variableName(key: string): string {
  return key.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}
