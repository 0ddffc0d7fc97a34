/** What the benchmark tells a worker process (bench/workerProcess.ts) over IPC. */
export type ToWorker =
  | { readonly type: 'start' }
  | { readonly type: 'takePeakRss' }
  | { readonly type: 'stop' };

/** What a worker process answers. */
export type FromWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'started'; readonly concurrency: number }
  | { readonly type: 'peakRss'; readonly bytes: number }
  | { readonly type: 'stopped' };
