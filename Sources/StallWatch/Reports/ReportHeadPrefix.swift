// Finding the end of a version 2 report's head in a file's first bytes, so listings read no more of it.
import Foundation

/// Where the `head` object of a version 2 report file ends, found without parsing the rest.
///
/// Version 2 files begin with `{"schemaVersion":2,"head":{` (``ReportDocumentV2``). This scans from there to
/// the brace that closes the head, respecting strings and escapes, and gives the bytes of a complete document
/// holding only the schema version and the head: what ``StallReport/listingDecodeKey`` decoding needs.
enum ReportHeadPrefix {
    static let opening = Array("{\"schemaVersion\":2,\"head\":{".utf8)
    /// How many bytes a listing reads first; a head longer than this (many notes) means reading the rest.
    static let readSize = 16 << 10

    /// Whether `bytes` starts like a version 2 file.
    static func isVersion2(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= opening.count && opening.indices.allSatisfy { bytes[$0] == opening[$0] }
    }

    /// The length of `{"schemaVersion":2,"head":{…}` in `bytes`, or nil when the head does not end in them.
    static func headEnd(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard isVersion2(bytes) else { return nil }
        var depth = 1
        var inString = false
        var index = opening.count
        while index < bytes.count {
            let byte = bytes[index]
            if inString {
                if byte == UInt8(ascii: "\\") {
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else {
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return index + 1 }
                default: break
                }
            }
            index += 1
        }
        return nil
    }

    /// `{"schemaVersion":2,"head":{…}}` from the first bytes of a version 2 file, or nil when they do not hold
    /// the whole head.
    static func headDocument(_ data: Data) -> Data? {
        guard let end = data.withUnsafeBytes({ headEnd(in: $0) }) else { return nil }
        var document = Data(data.prefix(end))
        document.append(UInt8(ascii: "}"))
        return document
    }
}
