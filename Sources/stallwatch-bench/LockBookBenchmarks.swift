// The lock book's cost per semaphore call: the library's interposed calls next to glibc's own, in one run.
import Foundation

enum LockBookBenchmarks {
    typealias Call = @convention(c) (UnsafeMutablePointer<sem_t>?) -> Int32

    /// Uncontended `sem_wait` + `sem_post` pairs, as a lock's take and release, on one semaphore and round-robin
    /// over 1000 (a service's many locks, whose records do not all stay in the cache), in thread CPU: glibc's calls
    /// (the anchor) and the lock book's (the library opened here with `RTLD_LOCAL` and called directly, as a program
    /// that preloaded it calls it). Best of 5 each.
    static func callCost() {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("libStallWatchLockBook.so").path
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), let wait = dlsym(handle, "sem_wait"),
            let post = dlsym(handle, "sem_post")
        else {
            Table.row(["lock book", "not measured: \(path) cannot be opened", ""])
            return
        }
        let bookWait = unsafeBitCast(wait, to: Call.self)
        let bookPost = unsafeBitCast(post, to: Call.self)
        let glibcWait: Call = { sem_wait($0!) }
        let glibcPost: Call = { sem_post($0!) }
        for count in [1, 1000] {
            let semaphores = UnsafeMutablePointer<sem_t>.allocate(capacity: count)
            defer { semaphores.deallocate() }
            for index in 0..<count { sem_init(semaphores + index, 0, 1) }
            let pairs = 5_000_000
            func best(_ take: Call, _ release: Call) -> Double {
                var best = Double.infinity
                for _ in 0..<5 {
                    let cpu0 = LoopBenchmarks.threadCPUNanos()
                    for i in 0..<pairs {
                        let semaphore = semaphores + (i % count)
                        _ = take(semaphore)
                        _ = release(semaphore)
                    }
                    best = min(best, Double(LoopBenchmarks.threadCPUNanos() - cpu0) / Double(2 * pairs))
                }
                return best
            }
            let anchor = best(glibcWait, glibcPost)
            let book = best(bookWait, bookPost)
            let what = count == 1 ? "one semaphore" : "\(count) semaphores round-robin"
            Table.row([
                "sem_wait + sem_post, \(what), glibc (best of 5)", String(format: "%.1f ns/call", anchor),
                "the anchor",
            ])
            Table.row([
                "sem_wait + sem_post, \(what), lock book (best of 5)", String(format: "%.1f ns/call", book),
                String(format: "%+.1f ns per call; bar ≤ 50 ns", book - anchor),
            ])
            for index in 0..<count { sem_destroy(semaphores + index) }
        }
    }
}
