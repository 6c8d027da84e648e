// PrintableText: the codepoints that may drive a terminal, and names filtered down to printable text.

/// What counts as terminal-dangerous for every part of StallWatch: C0 controls, DEL, C1 controls, and the
/// codepoints that reorder or hide text (bidi overrides and isolates, line and paragraph separators, zero-width
/// marks, interlinear annotation). Views escape these (`TerminalText` in the inspector); names that cross a
/// trust boundary (a heartbeat's loop name, written by another user's process) are filtered to printable text.
package enum PrintableText {
    /// Whether `scalar` may change what a terminal shows beyond printing a glyph.
    package static func isDangerous(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true  // C0, DEL, C1 (0x9B is a one-byte CSI)
        case 0x061C, 0x200B...0x200F, 0x2028...0x202E, 0x2060...0x2069, 0xFEFF: true  // bidi, separators
        case 0xFFF9...0xFFFB: true  // interlinear annotation controls
        default: false
        }
    }

    /// `text` without its dangerous codepoints (see ``isDangerous(_:)``).
    package static func filtered(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isDangerous) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars where !isDangerous(scalar) { out.append(scalar) }
        return String(out)
    }
}
