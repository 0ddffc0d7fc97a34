import { latestFiguresFile, readFigures } from './figures.ts';
import { formatReport } from './report.ts';

/**
 * `npm run bench:report [file]`: prints the report of a run from its figures
 * file, by default the newest under .slipway/bench.
 */
const file = process.argv[2] ?? (await latestFiguresFile());
if (!file) throw new Error('no figures file: give its path, or run `npm run bench` first');
console.log(formatReport(await readFigures(file)));
