// Loading and validating StallWatchConfiguration from a JSON file and the environment.
import Foundation

extension StallWatchConfiguration {
    /// Loads the defaults, then `file` (if given), then `STALLWATCH_<KEY>` variables from `environment`.
    ///
    /// - Parameters:
    ///   - file: A JSON object of settings; unknown keys are errors (a typo must not pass silently).
    ///   - environment: Usually `ProcessInfo.processInfo.environment`.
    /// - Throws: `StallWatchError` with code `.invalidConfiguration` naming the source, key, value and range.
    public static func load(file: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(StallWatchError) -> StallWatchConfiguration
    {
        var config = StallWatchConfiguration()
        if let file { try config.apply(file: file) }
        try config.apply(environment: environment)
        try config.validate(source: "configuration")
        return config
    }

    /// Like ``load(file:environment:)``, for a service's default configuration path: when `file` does not exist the
    /// service starts with the defaults (and `STALLWATCH_<KEY>` variables). A file that exists but cannot be read
    /// or holds invalid settings still throws: an operator's typo must not pass silently.
    public static func load(
        fileIfPresent file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(StallWatchError) -> StallWatchConfiguration {
        var status = stat()
        let missing = stat(file, &status) != 0 && errno == ENOENT
        return try load(file: missing ? nil : file, environment: environment)
    }

    /// Applies the keys of a JSON object file.
    package mutating func apply(file path: String) throws(StallWatchError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw StallWatchError(
                .invalidConfiguration, "\(path): cannot read the file (\(error.localizedDescription))",
                context: ["path": path])
        }
        let dict: [String: JSONScalar]
        do {
            dict = try JSONDecoder().decode([String: JSONScalar].self, from: data)
        } catch {
            throw StallWatchError(
                .invalidConfiguration, "\(path): expected a JSON object of settings (\(error))", context: ["path": path]
            )
        }
        for (name, value) in dict.sorted(by: { $0.key < $1.key }) {
            if name == "$schema" { continue }
            guard let key = Self.keys.first(where: { $0.name == name }) else {
                throw StallWatchError(
                    .invalidConfiguration, "\(path): unknown key \"\(name)\"", context: ["path": path, "key": name])
            }
            try set(key, json: value, source: path)
        }
    }

    /// Applies `STALLWATCH_<KEY>` overrides.
    package mutating func apply(environment: [String: String]) throws(StallWatchError) {
        for key in Self.keys {
            guard let text = environment[key.environmentName] else { continue }
            try set(key, text: text, source: "environment variable \(key.environmentName)")
        }
    }

    /// Applies one command-line override, `flag text` (`--threshold-ms 100`) for the setting `key`
    /// (`thresholdMs`): the value must pass the key's own rule (its range or choices), and the settings that depend
    /// on it follow it: a stall threshold above the hang threshold raises the hang threshold with it. The one path
    /// every command line (the CLI's, the demo's) overrides settings through.
    ///
    /// - Throws: `.invalidConfiguration` naming the flag, the value and what is allowed
    ///   (`--threshold-ms 5: expected an integer from 10 to 600000`).
    package mutating func override(_ key: String, with text: String, flag: String) throws(StallWatchError) {
        guard let setting = Self.keys.first(where: { $0.name == key }) else {
            throw StallWatchError(.invalidConfiguration, "\(flag): no setting \"\(key)\"", context: ["key": key])
        }
        do {
            try set(setting, text: text, source: flag)
        } catch {
            throw StallWatchError(
                .invalidConfiguration, "\(flag) \(text): expected \(setting.allowed)",
                context: ["key": key, "value": text, "source": flag])
        }
        if key == "thresholdMs" { hangThresholdMs = max(hangThresholdMs, thresholdMs) }
    }

    /// Cross-key rules.
    func validate(source: String) throws(StallWatchError) {
        if hangThresholdMs < thresholdMs {
            throw StallWatchError(
                .invalidConfiguration,
                "\(source): hangThresholdMs \(hangThresholdMs) is below thresholdMs \(thresholdMs); it must be at least the stall threshold",
                context: ["key": "hangThresholdMs", "value": String(hangThresholdMs)])
        }
        if leadUpBucketMs > leadUpWindowMs || leadUpWindowMs / leadUpBucketMs > 60_000 {
            throw StallWatchError(
                .invalidConfiguration,
                "\(source): leadUpBucketMs \(leadUpBucketMs) must be at most leadUpWindowMs \(leadUpWindowMs) and cut it "
                    + "into at most 60000 buckets",
                context: ["key": "leadUpBucketMs", "value": String(leadUpBucketMs)])
        }
    }

    /// The settings as a JSON object (the shape of `Config/stallwatch.json`).
    var jsonObject: [String: Any] {
        var out: [String: Any] = [:]
        for key in Self.keys {
            switch key.kind {
            case .integer(_, let path): out[key.name] = self[keyPath: path]
            case .choice(_, let get, _): out[key.name] = get(self)
            case .text(let path): out[key.name] = self[keyPath: path]
            case .flag(let path): out[key.name] = self[keyPath: path]
            }
        }
        return out
    }

    private mutating func set(_ key: Key, json value: JSONScalar, source: String) throws(StallWatchError) {
        switch (key.kind, value) {
        case (.integer, .integer(let number)): try set(key, text: String(number), source: source)
        case (.flag(let path), .bool(let flag)): self[keyPath: path] = flag
        case (.choice, .string(let text)), (.text, .string(let text)): try set(key, text: text, source: source)
        default: throw invalid(key, value.description, source)
        }
    }

    private mutating func set(_ key: Key, text: String, source: String) throws(StallWatchError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        switch key.kind {
        case .integer(let range, let path):
            guard let value = Int(trimmed), range.contains(value) else { throw invalid(key, text, source) }
            self[keyPath: path] = value
        case .choice(_, _, let set):
            guard set(&self, trimmed) else { throw invalid(key, text, source) }
        case .text(let path):
            self[keyPath: path] = text
        case .flag(let path):
            switch trimmed.lowercased() {
            case "1", "true", "yes", "on": self[keyPath: path] = true
            case "0", "false", "no", "off": self[keyPath: path] = false
            default: throw invalid(key, text, source)
            }
        }
    }

    private func invalid(_ key: Key, _ value: String, _ source: String) -> StallWatchError {
        StallWatchError(
            .invalidConfiguration, "\(source): \(key.name) = \(value) is invalid; expected \(key.allowed)",
            context: ["key": key.name, "value": value, "source": source])
    }
}

/// A JSON value as a settings file may hold it, keeping booleans, integers and other numbers apart.
enum JSONScalar: Decodable, CustomStringConvertible {
    case bool(Bool)
    case integer(Int)
    case number(Double)
    case string(String)
    case other

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let v = try? c.decode(Bool.self) {
            self = .bool(v)
        } else if let v = try? c.decode(Int.self) {
            self = .integer(v)
        } else if let v = try? c.decode(Double.self) {
            self = .number(v)
        } else if let v = try? c.decode(String.self) {
            self = .string(v)
        } else {
            self = .other
        }
    }

    var description: String {
        switch self {
        case .bool(let v): return String(v)
        case .integer(let v): return String(v)
        case .number(let v): return String(v)
        case .string(let v): return "\"\(v)\""
        case .other: return "(an array or object)"
        }
    }
}
