// Helpers shared by the StallWatch tests.
import CStallWatch

enum StallWatchTestSupport {
    static func currentThreadID() -> Int32 { sw_gettid() }
}
