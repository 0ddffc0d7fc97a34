#!/usr/bin/env node
// The `slipway` executable: plain JavaScript so Node runs it as is, from any
// working directory. It registers tsx, then loads the TypeScript CLI.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
