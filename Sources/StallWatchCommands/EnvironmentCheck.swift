// EnvironmentCheck: a warning for each STALLWATCH_* variable that nothing reads, so a typo does not go unseen.
import StallWatch

enum EnvironmentCheck {
    /// Prints `stallwatch: warning: unknown environment variable …` on standard error for every `STALLWATCH_*`
    /// variable StallWatch does not read, with the closest known name.
    static func warnAboutUnknownVariables(_ environment: [String: String], console: Console) {
        let known = StallWatchConfiguration.knownEnvironmentVariables.sorted()
        for name in StallWatchConfiguration.unknownEnvironmentVariables(in: environment) {
            console.printError(
                "stallwatch: warning: unknown environment variable \(name) is ignored"
                    + Suggestion.hint(for: name, in: known))
        }
    }
}
