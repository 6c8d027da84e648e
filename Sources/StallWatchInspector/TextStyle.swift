// TextStyle: ANSI colour for the report views, on or off.

/// Wraps text in SGR sequences when colour is on; the views take one so that they need no console.
package struct TextStyle: Sendable, Equatable {
    /// Whether text is styled at all (a terminal without `NO_COLOR`).
    package var useColor: Bool

    package init(useColor: Bool) {
        self.useColor = useColor
    }

    /// `text` wrapped in an SGR sequence (`"1"` bold, `"31"` red, …) when colour is on; empty text stays empty.
    package func styled(_ text: String, _ code: String) -> String {
        useColor && !text.isEmpty ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }
}
