// A small Node.js HTTP service that idles in libuv's epoll loop until a late piece of work: once it has idled
// IDLE_MS (its own clock), one timer callback blocks the loop 800 ms in a synchronous wait, printing
// "STUCK <CLOCK_REALTIME ns>" as it starts and "DONE" after; then the server closes and the program exits 0.
//
// usage: node idle_service.js IDLE_MS   (prints READY once the server listens)
'use strict';
const http = require('http');

const idleMs = Number(process.argv[2] || 3000);
const server = http.createServer((request, response) => response.end('ok\n'));
server.listen(0, '127.0.0.1', () => {
  console.log('READY');
  setTimeout(() => {
    console.log(`STUCK ${BigInt(Date.now()) * 1000000n}`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 800);
    console.log('DONE');
    server.close();
  }, idleMs);
});
