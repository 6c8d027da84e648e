// ProtobufWriter: the few protocol-buffer wire-format encodings the pprof exporter needs.
import Foundation

/// Appends protocol-buffer fields (wire types 0 and 2) to a byte buffer.
///
/// Only what `profile.proto` uses: varint scalars, length-delimited strings and messages, packed repeated
/// varints. Zero scalars are written only when asked (proto3 omits defaults; readers treat absence as 0).
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7f) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func key(_ field: Int, wireType: UInt64) { varint(UInt64(field) << 3 | wireType) }

    /// A varint field (int64, uint64, bool); skipped when 0.
    mutating func field(_ number: Int, _ value: UInt64) {
        guard value != 0 else { return }
        key(number, wireType: 0)
        varint(value)
    }

    mutating func field(_ number: Int, _ value: Int64) { field(number, UInt64(bitPattern: value)) }
    mutating func field(_ number: Int, _ value: Int) { field(number, Int64(value)) }
    mutating func field(_ number: Int, _ value: Bool) { field(number, value ? UInt64(1) : 0) }

    /// A length-delimited field: bytes, a string, or an embedded message. Written even when empty.
    mutating func field(_ number: Int, bytes value: [UInt8]) {
        key(number, wireType: 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func field(_ number: Int, string value: String) { field(number, bytes: Array(value.utf8)) }

    mutating func field(_ number: Int, message build: (inout ProtobufWriter) -> Void) {
        var inner = ProtobufWriter()
        build(&inner)
        field(number, bytes: inner.bytes)
    }

    /// A packed repeated varint field; skipped when empty.
    mutating func packed(_ number: Int, _ values: [UInt64]) {
        guard !values.isEmpty else { return }
        var inner = ProtobufWriter()
        for value in values { inner.varint(value) }
        field(number, bytes: inner.bytes)
    }
}
