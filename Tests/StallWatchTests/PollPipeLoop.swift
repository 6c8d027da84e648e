// PollPipeLoop: a thread of this process that idles in `poll` on a pipe and runs a piece of work for each byte.
import CStallWatchCore
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A thread that waits in `poll` on a pipe (timing out every 5 s and polling again), reads one byte when it is ready
/// and runs ``work(_:)`` with it (a subclass says what it does); byte 0 ends it. Its id is published once it runs.
/// What the work shares with the test must go through atomics, never a lock: a lock wait would be a sleep of the
/// loop's own.
class PollPipeLoop: @unchecked Sendable {  // `fds` are set before the thread starts; the rest is atomic.
    let threadID = Atomic<Int32>(0)
    /// How many times its `poll` returned, timed out or not.
    let wakes = Atomic<Int>(0)
    private let done = DispatchSemaphore(value: 0)
    private var fds: [Int32] = [0, 0]

    init() throws {
        try #require(pipe(&fds) == 0)
        let readEnd = fds[0]
        Thread { [self] in
            threadID.store(sw_gettid(), ordering: .releasing)
            var byte: UInt8 = 0
            while true {
                var ready = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                let result = poll(&ready, 1, 5000)
                wakes.add(1, ordering: .relaxed)
                guard result > 0 else { continue }
                guard read(readEnd, &byte, 1) == 1, byte != 0 else { break }
                self.work(byte)
            }
            done.signal()
        }.start()
    }

    /// What the loop does with a byte other than 0, on its thread.
    func work(_ byte: UInt8) {}

    func send(_ byte: UInt8) {
        var value = byte
        _ = write(fds[1], &value, 1)
    }

    /// Ends the thread (after the work under way) and closes the pipe.
    func stop() {
        send(0)
        done.wait()
        close(fds[0])
        close(fds[1])
    }
}
