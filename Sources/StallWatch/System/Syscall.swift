// The small syscall wrapper layer: retries EINTR and turns errno into a StallWatchError naming the call.
#if canImport(Glibc)
    import Glibc
#endif

@usableFromInline
package enum Syscall {
    /// Runs `body` until it does not fail with EINTR; a result of -1 becomes a `.systemCall` error naming `call`.
    @inlinable
    @discardableResult
    static func retrying<T: FixedWidthInteger>(_ call: String, _ body: () -> T) throws(StallWatchError) -> T {
        while true {
            let result = body()
            if result == -1 {
                let err = Glibc.errno
                if err == EINTR { continue }
                throw StallWatchError(
                    .systemCall, "\(call): \(String(cString: strerror(err)))", context: ["call": call], errno: err)
            }
            return result
        }
    }

    package static func error(_ call: String, errno err: Int32, path: String? = nil) -> StallWatchError {
        var context = ["call": call]
        if let path { context["path"] = path }
        let where_ = path.map { " \($0)" } ?? ""
        return StallWatchError(
            .systemCall, "\(call)\(where_): \(String(cString: strerror(err)))", context: context, errno: err)
    }
}
