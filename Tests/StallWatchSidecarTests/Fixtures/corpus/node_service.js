// A small Node.js service nobody instrumented, for the sidecar's corpus: it idles in libuv's loop (an interval
// every 100 ms), then one timer callback stalls the loop in the way MODE says, then it idles again and exits 0.
//
// usage: node [--perf-basic-prof] node_service.js MODE [STALL_MS]   (prints READY once the loop runs)
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const mode = process.argv[2];
const stallMs = Number(process.argv[3] || 1000);

function burnCpu(ms) {
  // A fixed amount of work (about ms milliseconds of it here), however long a loaded machine makes it, and no
  // system call in between.
  let x = 0;
  for (let n = 0; n < ms * 30; n++) {
    for (let i = 0; i < 10000; i++) x = (x + i * 7) % 13;
  }
  return x;
}

function renderTemplates(ms) {
  // A handler that compiles each template it has not seen before into a function, as template engines do, and
  // renders it: CPU-bound, with V8 compiling (and, under --perf-basic-prof, logging) new code all along.
  const end = Date.now() + ms;
  let n = 0, out = 0;
  while (Date.now() < end) {
    const template = new Function('x', `let s = 0; for (let i = 0; i < 200000; i++) s = (s + i * ${n++} + x) % 97; return s;`);
    for (let k = 0; k < 50; k++) out += template(k);
  }
  return out;
}

function waitForChild(ms) {
  // The subprocess runner spins its own event loop (another epoll fd) until the child exits.
  execFileSync('/bin/sleep', [String(ms / 1000)]);
}

function syncWriteAndFsync() {
  const file = path.join(os.tmpdir(), `node_service_${process.pid}`);
  const fd = fs.openSync(file, 'w');
  fs.unlinkSync(file);
  const block = Buffer.alloc(1 << 20, 120);
  for (let i = 0; i < 768; i++) fs.writeSync(fd, block);  // then one fsync of ≈0.5 s
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

function waitOnAtomics(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

const ticker = setInterval(() => {}, 100);
console.log('READY');
setTimeout(() => {
  if (mode === 'cpu') burnCpu(stallMs);
  else if (mode === 'compile') renderTemplates(stallMs);
  else if (mode === 'child') waitForChild(stallMs);
  else if (mode === 'fsync') syncWriteAndFsync();
  else if (mode === 'atomics') waitOnAtomics(stallMs);
  setTimeout(() => clearInterval(ticker), mode === 'idle' ? 1500 : 1000);
}, 1000);
