import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

/**
 * `node --import tsx scripts/slowestTestFiles.ts REPORT...`: the five test
 * files that took longest in vitest's JSON reports (one per run of .ci/run),
 * so a suite that grows slow shows where.
 */
const Report = z.object({ testResults: z.array(z.object({ name: z.string(), startTime: z.number(), endTime: z.number() })) });

const rows: { file: string; run: string; seconds: number }[] = [];
for (const report of process.argv.slice(2)) {
  const { testResults } = Report.parse(JSON.parse(await readFile(report, 'utf8')));
  for (const result of testResults) {
    rows.push({
      file: path.relative(process.cwd(), result.name),
      run: path.basename(report, '.json'),
      seconds: (result.endTime - result.startTime) / 1000,
    });
  }
}
rows.sort((a, b) => b.seconds - a.seconds);
console.log('== the five slowest test files ==');
for (const { file, run, seconds } of rows.slice(0, 5)) console.log(`${seconds.toFixed(1).padStart(7)} s  ${file} (${run})`);
