import type { NoticeListener } from '../read/CommandNotices.ts';

/**
 * What a page learns: the objects and commands that changed ("lease:12",
 * "command:40"), or RESYNC alone when changes may have been missed (the
 * server's LISTEN connection was made again): every page looks again.
 */
export type Changes = readonly string[];
const RESYNC = '*resync';

/**
 * Turns the server's one LISTEN connection into "these changed" batches for
 * every open page. Notices arriving within `coalesceMs` of the first of a
 * batch go out together, each target once, so a burst of a thousand
 * commands settling is one message per page, not a thousand; and nothing
 * here reads the database (the pages decide whether to look again).
 */
export class ChangeFeed {
  private readonly subscribers = new Set<(changes: Changes) => void>();
  private pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly unwatch: () => void;

  constructor(
    listener: NoticeListener,
    private readonly coalesceMs = 200,
  ) {
    this.unwatch = listener.watch(
      (notice) => this.changed(notice.target, `command:${notice.id}`),
      () => this.changed(RESYNC),
    );
  }

  subscribe(onChanges: (changes: Changes) => void): () => void {
    this.subscribers.add(onChanges);
    return () => this.subscribers.delete(onChanges);
  }

  close(): void {
    this.unwatch();
    clearTimeout(this.timer);
    this.subscribers.clear();
  }

  private changed(...targets: string[]): void {
    for (const target of targets) this.pending.add(target);
    this.timer ??= setTimeout(() => this.flush(), this.coalesceMs);
  }

  private flush(): void {
    this.timer = undefined;
    const changes = [...this.pending];
    this.pending = new Set();
    for (const subscriber of this.subscribers) subscriber(changes);
  }
}
