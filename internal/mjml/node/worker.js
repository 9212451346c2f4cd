'use strict';

// Long-lived MJML compiler driven by the Go package tidings/mjml.
//
// Protocol, one JSON object per line:
//   stdout, once at start:  {"ready": true, "version": "<mjml version>"}
//   stdin, per request:     {"id": <number>, "mjml": "<source>"}
//   stdout, per request:    {"id": <number>, "html": "<output>", "errors": [{"line", "message", "tagName"}]}
// A request whose MJML is rejected has a non-empty "errors" and no "html".
// The process exits when stdin is closed.

// MJML and its dependencies may print warnings; stdout belongs to the protocol,
// so everything printed through console goes to stderr instead.
console.log = console.info = console.warn = console.debug = console.error;

const readline = require('readline');

let mjml2html;
let version;
try {
  mjml2html = require('mjml');
  version = require('mjml/package.json').version;
} catch (err) {
  process.stderr.write(`cannot load mjml (run npm ci --prefix mjml/node): ${err.message}\n`);
  process.exit(2);
}

const options = {
  // Whatever strict validation rejects is a validation error for the API.
  validationLevel: 'strict',
  // Outlook conditional comments are comments; they must survive.
  keepComments: true,
  minify: false,
  beautify: false,
  // mj-include would read files from this machine's disk.
  ignoreIncludes: true,
};

function send(msg) {
  // Writes to a pipe are synchronous on Linux, so nothing is lost on exit.
  process.stdout.write(JSON.stringify(msg) + '\n');
}

function toMessages(errors) {
  return (errors || []).map((e) => ({
    line: typeof e.line === 'number' ? e.line : 0,
    message: String(e.message || e.formattedMessage || e),
    tagName: e.tagName ? String(e.tagName) : '',
  }));
}

function compile(id, source) {
  try {
    const result = mjml2html(String(source), options);
    if (result.errors && result.errors.length > 0) {
      return { id, errors: toMessages(result.errors) };
    }
    return { id, html: result.html, errors: [] };
  } catch (err) {
    // Strict validation throws with err.errors; malformed input
    // ("no <mjml> root", unparsable) throws a plain Error.
    if (Array.isArray(err.errors) && err.errors.length > 0) {
      return { id, errors: toMessages(err.errors) };
    }
    return { id, errors: [{ line: 0, message: String(err.message || err), tagName: '' }] };
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });

rl.on('line', (line) => {
  if (line.trim() === '') {
    return;
  }
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    // The Go side never sends this; say so loudly and let it restart us.
    process.stderr.write(`bad request line: ${err.message}\n`);
    process.exit(3);
  }
  send(compile(req.id, req.mjml));
});

rl.on('close', () => process.exit(0));

process.stdout.on('error', () => process.exit(0));

send({ ready: true, version });
