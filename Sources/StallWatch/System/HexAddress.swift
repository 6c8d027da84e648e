// Addresses are integers in memory and `0x…` hexadecimal strings in /proc files and report JSON: the one
// place that converts.

extension UInt64 {
    /// `0x…` lowercase hexadecimal, as addresses appear in reports.
    package var hexAddress: String { "0x" + String(self, radix: 16) }

    /// Parses `0x…` (or bare) hexadecimal.
    package init?(hexAddress text: String) {
        let digits = text.hasPrefix("0x") || text.hasPrefix("0X") ? text.dropFirst(2) : Substring(text)
        guard !digits.isEmpty, let value = UInt64(digits, radix: 16) else { return nil }
        self = value
    }
}
