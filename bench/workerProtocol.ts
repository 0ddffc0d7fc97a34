/** What the benchmark tells a worker process over IPC (bench/workerProcess.ts, bench/peer/peerWorkerProcess.ts). */
export type ToWorker = { readonly type: 'start' } | { readonly type: 'takePeakRss' } | { readonly type: 'stop' };

/** What a worker process answers. */
export type FromWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'started'; readonly concurrency: number }
  | { readonly type: 'peakRss'; readonly bytes: number }
  | { readonly type: 'stopped' };

/** Any message of a protocol that extends this one. */
export interface Message {
  readonly type: string;
}
