// InspectorError: the StallWatchInspector module's one public error type.

/// An error from presenting or post-processing reports: a stable code, a message a user can act on, and its
/// context (the file, the build-ids).
///
/// A struct with a nested `Code` (not an enum) so that new codes can be added without breaking callers.
public struct InspectorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in a form callers can match on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate let raw: String
        public var description: String { raw }

        /// The binary at an image's path is a different build from the one the report names (its build-id
        /// differs) and no debug file with the report's build-id exists; `context` holds `path`, `expected` and
        /// `found`.
        public static let buildIDMismatch = Code(raw: "buildIDMismatch")
    }

    public var code: Code
    public var message: String
    /// Extra facts: a file path, the build-ids compared.
    public var context: [String: String]

    public init(_ code: Code, _ message: String, context: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.context = context
    }

    public var description: String { message }
}
