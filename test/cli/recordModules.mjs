// Loaded with `node --import` ahead of the CLI: on exit, writes every file
// the process loaded (ES modules through a load hook, CommonJS ones through
// the CommonJS loader) to RECORD_MODULES_TO, one per line.
import { writeFileSync } from 'node:fs';
import Module, { register } from 'node:module';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';

const files = new Set();
const { port1, port2 } = new MessageChannel();
port1.on('message', (url) => files.add(url));
port1.unref();
const hooks = `
let port;
export function initialize(data) { port = data.port; }
export async function load(url, context, next) { port.postMessage(url); return next(url, context); }
`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`, { data: { port: port2 }, transferList: [port2] });

const load = Module._load;
Module._load = function (...args) {
  const [request, parent, isMain] = args;
  try {
    files.add(Module._resolveFilename(request, parent, isMain));
  } catch {
    // Not a file (a built-in), or not there: the real load says so.
  }
  return load.apply(this, args);
};

process.on('exit', () => {
  // The hooks' last messages may still be on their way.
  for (let message = receiveMessageOnPort(port1); message; message = receiveMessageOnPort(port1)) files.add(message.message);
  const paths = [...files].map((file) => file.replace(/^file:\/\//, '')).filter((file) => file.startsWith('/'));
  writeFileSync(process.env.RECORD_MODULES_TO, `${paths.join('\n')}\n`);
});
