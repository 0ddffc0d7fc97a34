// Types of builtFrom.mjs, which stays plain JavaScript: the launcher loads it before any compiler.

/** Each source file (relative to `root`) with its size and modification time. */
export function sourceStamps(root: string): Record<string, string>;

/** Why the build under `root`/dist does not match the source beside it, or undefined when it does. */
export function staleBuild(root: string): string | undefined;
