import { LEASE_COMMANDS } from './leaseCommands.ts';
import type { PeerCommand } from './peerCommand.ts';
import { RESOURCE_COMMANDS } from './resourceCommands.ts';

/** Every command kind of the peer, by the task identifier of its jobs. */
export const PEER_COMMANDS: Readonly<Record<string, PeerCommand>> = { ...LEASE_COMMANDS, ...RESOURCE_COMMANDS };
