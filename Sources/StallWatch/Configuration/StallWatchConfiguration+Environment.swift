// The STALLWATCH_* environment variables StallWatch reads, so that a misspelt one can be warned about.

extension StallWatchConfiguration {
    /// Variables read outside the configuration keys: the sampling signal, where offline symbolication finds
    /// debug files, and the switches of StallWatch's own test and benchmark scripts.
    static let otherEnvironmentVariables: Set<String> = [
        "STALLWATCH_SAMPLE_SIGNAL", "STALLWATCH_DEBUG_DIRECTORY", "STALLWATCH_MEASURE", "STALLWATCH_BENCH",
        "STALLWATCH_UPDATE_GOLDEN", "STALLWATCH_REQUIRE_JSONSCHEMA", "STALLWATCH_PACKAGE_URL", "STALLWATCH_VERSION",
    ]

    /// Every `STALLWATCH_*` variable StallWatch reads: one per configuration key (`STALLWATCH_THRESHOLD_MS`) and
    /// the few of ``otherEnvironmentVariables``.
    package static var knownEnvironmentVariables: Set<String> {
        Set(keys.map(\.environmentName)).union(otherEnvironmentVariables)
    }

    /// The `STALLWATCH_*` variables of `environment` that StallWatch does not read (a typo is silently ignored
    /// otherwise), sorted.
    package static func unknownEnvironmentVariables(in environment: [String: String]) -> [String] {
        let known = knownEnvironmentVariables
        return environment.keys.filter { $0.hasPrefix("STALLWATCH_") && !known.contains($0) }.sorted()
    }
}
