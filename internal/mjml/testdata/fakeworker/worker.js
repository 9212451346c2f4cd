'use strict';
// A stand-in for ../../node/worker.js that speaks the same protocol without
// MJML, for tests of the pool's own behaviour (timeouts, restarts) that
// must not depend on how fast the machine compiles: a request containing
// "HANG" is never answered, anything else is answered at once.
const readline = require('readline');
process.stdout.write(JSON.stringify({ ready: true, version: 'fake' }) + '\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === '') return;
  const req = JSON.parse(line);
  if (String(req.mjml).includes('HANG')) return;
  process.stdout.write(JSON.stringify({ id: req.id, html: '<p>ok</p>', errors: [] }) + '\n');
});
