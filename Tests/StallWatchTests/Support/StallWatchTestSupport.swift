// Helpers shared by the StallWatch tests.
import CStallWatchCore

enum StallWatchTestSupport {
    static func currentThreadID() -> Int32 { sw_gettid() }
}
