// ProtobufWriter: the few protocol-buffer wire-format encodings the pprof exporter needs, and a gzip wrapper.
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

/// gzip (RFC 1952) around DEFLATE "stored" blocks (RFC 1951 §3.2.4): valid gzip that any reader inflates,
/// without a compressor. pprof files are small enough that compression does not matter.
enum Gzip {
    static func wrap(_ payload: [UInt8]) -> [UInt8] {
        // ID1 ID2, CM=8 (deflate), FLG=0, MTIME=0 (reproducible output), XFL=0, OS=255 (unknown).
        var out: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]
        var start = 0
        repeat {
            let count = min(65_535, payload.count - start)
            let final: UInt8 = start + count == payload.count ? 1 : 0
            // BFINAL + BTYPE=00, then (already byte-aligned) LEN and its one's complement NLEN, little-endian.
            out.append(final)
            out += [UInt8(count & 0xff), UInt8(count >> 8), UInt8(~count & 0xff), UInt8((~count >> 8) & 0xff)]
            out += payload[start..<start + count]
            start += count
        } while start < payload.count
        out += littleEndian(crc32(payload))
        out += littleEndian(UInt32(truncatingIfNeeded: payload.count))
        return out
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24)]
    }

    private static let table: [UInt32] = (0..<256).map { index in
        var c = UInt32(index)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xedb8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// CRC-32 as gzip and zlib use it (reflected, polynomial 0xEDB88320).
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc >> 8) }
        return crc ^ 0xffff_ffff
    }
}
