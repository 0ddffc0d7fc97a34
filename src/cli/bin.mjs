#!/usr/bin/env node
// The `slipway` executable: plain JavaScript so Node runs it as is, from any
// working directory. It registers tsx, then loads the TypeScript CLI.
import { register } from 'tsx/esm/api';

// The packages every call loads, imported before tsx's hooks are: on Node 20
// those hooks run on a thread of their own, and each module resolved and
// loaded while they are registered costs round trips to it (kysely alone is
// 262 modules). These are plain JavaScript that tsx has nothing to do for;
// the TypeScript importing them later gets these same modules (same URLs),
// from Node's cache. See docs/cli.md, "Start-up time".
await Promise.all([import('kysely'), import('zod'), import('commander'), import('pg'), import('pino')]);
register();
await import('./main.ts');
