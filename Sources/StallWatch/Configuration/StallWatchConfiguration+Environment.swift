// The STALLWATCH_* environment variables StallWatch reads: one list, read through by the library and checked
// against by the command line, so a variable is never read by one and unknown to the other.
import Foundation

/// A `STALLWATCH_*` environment variable StallWatch reads besides those of the configuration keys
/// (`STALLWATCH_THRESHOLD_MS` for `thresholdMs`, …). The library reads each of them through ``value``, and the
/// command line's check of unknown variables (``StallWatchConfiguration/knownEnvironmentVariables``) takes its
/// names from ``all``: adding a variable here is the only way to read one.
package struct StallWatchEnvironmentVariable: Hashable, Sendable, CustomStringConvertible {
    /// The variable's name, `STALLWATCH_…`.
    package let name: String
    /// What it does, in a sentence.
    package let purpose: String

    package var description: String { name }

    /// Its value in this process's environment now; nil when it is not set.
    package var value: String? { getenv(name).map { String(cString: $0) } }

    /// Its value in `environment`; nil when it is not set.
    package func value(in environment: [String: String]) -> String? { environment[name] }

    /// The real-time signal of in-process sampling (`SIGRTMIN+N`, `SIGRTMAX-N` or its number).
    package static let sampleSignal = Self(
        name: "STALLWATCH_SAMPLE_SIGNAL", purpose: "the real-time signal in-process sampling uses")
    /// Set (to anything): no capture helper process; threads that cannot be signalled are not sampled.
    package static let noPtraceHelper = Self(
        name: "STALLWATCH_NO_PTRACE_HELPER",
        purpose: "disables the ptrace capture helper (threads that block signals are then not sampled)")
    /// Where reports go when the configuration names no directory.
    package static let reportDirectory = Self(
        name: "STALLWATCH_REPORT_DIRECTORY", purpose: "the report directory when the configuration names none")
    /// Where `reports symbolicate` looks for separate debug files.
    package static let debugDirectory = Self(
        name: "STALLWATCH_DEBUG_DIRECTORY", purpose: "where offline symbolication finds separate debug files")

    // The switches of StallWatch's own test and benchmark scripts: the command line runs under them there and must
    // not call them unknown.
    /// Runs the measurement-only tests.
    package static let measure = Self(name: "STALLWATCH_MEASURE", purpose: "runs measurement-only tests")
    /// Installs the benchmark-only tools in `scripts/bootstrap.sh`.
    package static let bench = Self(name: "STALLWATCH_BENCH", purpose: "installs the benchmarks' tools")
    /// Rewrites the golden report fixtures instead of comparing with them.
    package static let updateGolden = Self(
        name: "STALLWATCH_UPDATE_GOLDEN", purpose: "rewrites the golden report fixtures")
    /// Rewrites the checked-in lists of each library's public API instead of comparing with them.
    package static let updatePublicAPI = Self(
        name: "STALLWATCH_UPDATE_PUBLIC_API", purpose: "rewrites the checked-in public API lists")
    /// Kept for older scripts: schema validation is always required now.
    package static let requireJSONSchema = Self(
        name: "STALLWATCH_REQUIRE_JSONSCHEMA", purpose: "no effect (schema validation is always required)")
    /// The StallWatch package the downstream example builds against.
    package static let packageURL = Self(
        name: "STALLWATCH_PACKAGE_URL", purpose: "the StallWatch package the downstream example depends on")
    /// The version of StallWatch the downstream example asks for.
    package static let version = Self(
        name: "STALLWATCH_VERSION", purpose: "the StallWatch version the downstream example depends on")
    /// Runs the stress tests' checks that hold only in a test process of their own.
    package static let stress = Self(
        name: "STALLWATCH_STRESS", purpose: "the stress tests run in a test process of their own")
    /// The seed of the randomised tests, to replay a run.
    package static let testSeed = Self(
        name: "STALLWATCH_TEST_SEED", purpose: "the seed of the randomised tests (printed by each), to replay one")

    /// Every variable of this kind.
    package static let all: [Self] = [
        sampleSignal, noPtraceHelper, reportDirectory, debugDirectory, measure, bench, updateGolden,
        updatePublicAPI, requireJSONSchema, packageURL, version, stress, testSeed,
    ]
}

extension StallWatchConfiguration {
    /// Every `STALLWATCH_*` variable StallWatch reads: one per configuration key (`STALLWATCH_THRESHOLD_MS`) and
    /// those of ``StallWatchEnvironmentVariable/all``.
    package static var knownEnvironmentVariables: Set<String> {
        Set(keys.map(\.environmentName)).union(StallWatchEnvironmentVariable.all.map(\.name))
    }

    /// The `STALLWATCH_*` variables of `environment` that StallWatch does not read (a typo is silently ignored
    /// otherwise), sorted.
    package static func unknownEnvironmentVariables(in environment: [String: String]) -> [String] {
        let known = knownEnvironmentVariables
        return environment.keys.filter { $0.hasPrefix("STALLWATCH_") && !known.contains($0) }.sorted()
    }
}
