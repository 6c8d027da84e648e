// Arguments: the small command-line parser behind every stallwatch subcommand.
import StallWatch

/// The arguments of one subcommand after parsing: positionals, flags and valued options.
package struct Arguments: Sendable, Equatable {
    var positionals: [String] = []
    var flags: Set<String> = []
    var options: [String: String] = [:]
    /// Every value of each option, in order, for options that may be repeated (`options` keeps the last).
    var repeated: [String: [String]] = [:]

    /// Whether `--name` was given.
    func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// Parses `arguments` against what a subcommand accepts. `--name=value` and `--name value` both work for
    /// options; `--` ends option parsing; `-h`/`--help` is always accepted as the flag `--help`; the short forms
    /// of ``CommandHelp/shortForms`` (`-p`) stand for their long option where the command accepts it.
    /// - Throws: ``CommandError`` (usage) for an unknown option, a missing option value or a wrong number of
    ///   positionals.
    static func parse(
        _ arguments: [String], flags allowedFlags: Set<String>, options allowedOptions: Set<String>,
        positionals range: ClosedRange<Int>, command: String
    ) throws(CommandError) -> Arguments {
        var result = Arguments()
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                result.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                result.flags.insert("--help")
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            var name = parts[0]
            if let long = CommandHelp.shortForms[name], !allowedFlags.contains(name), !allowedOptions.contains(name),
                allowedFlags.contains(long) || allowedOptions.contains(long)
            {
                name = long  // -p PID is --pid PID
            }
            if allowedFlags.contains(name) && parts.count == 1 {
                result.flags.insert(name)
            } else if allowedOptions.contains(name) {
                if parts.count == 2 {
                    result.options[name] = parts[1]
                    result.repeated[name, default: []].append(parts[1])
                } else if index < arguments.count {
                    result.options[name] = arguments[index]
                    result.repeated[name, default: []].append(arguments[index])
                    index += 1
                } else {
                    throw .usage("\(command): \(name) needs a value")
                }
            } else {
                let known = allowedFlags.union(allowedOptions).union(["--help"])
                throw .usage("\(command): unknown option \(argument)\(Suggestion.hint(for: name, in: known.sorted()))")
            }
        }
        if result.has("--help") { return result }
        guard range.contains(result.positionals.count) else {
            let extra = result.positionals.count > range.upperBound
            throw .usage(
                extra
                    ? "\(command): unexpected argument \(result.positionals[range.upperBound])"
                    : "\(command): missing argument")
        }
        return result
    }
}

extension Arguments {
    /// The options that override a setting of the configuration, and the setting each one overrides.
    static let settingOptions = [
        ("--report-dir", "reportDirectory"), ("--threshold-ms", "thresholdMs"),
        ("--sample-interval-ms", "sampleIntervalMs"), ("--heartbeat-dir", "heartbeatDirectory"),
    ]

    /// The configuration of a subcommand: the defaults, `STALLWATCH_<KEY>` variables of `environment`, then the
    /// ``settingOptions`` given, each checked by its setting's own rule
    /// (``StallWatchConfiguration/override(_:with:flag:)``).
    /// - Throws: `StallWatchError` `.invalidConfiguration` (exit code 2) naming the variable or option.
    func configuration(environment: [String: String]) throws(StallWatchError) -> StallWatchConfiguration {
        var configuration = try StallWatchConfiguration.load(environment: environment)
        for (flag, key) in Self.settingOptions {
            if let text = options[flag] { try configuration.override(key, with: text, flag: flag) }
        }
        return configuration
    }

    /// The integer value of option `name` when given; it must lie in `range`.
    /// - Throws: ``CommandError`` (usage) naming the option, its value and the range.
    func number(_ name: String, in range: ClosedRange<Int>) throws(CommandError) -> Int? {
        guard let text = options[name] else { return nil }
        return try Self.number(text, name, range)
    }

    /// `text`, the value of option `name`, as an integer in `range`.
    static func number(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws(CommandError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw .usage("\(name) \(text): expected an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}
