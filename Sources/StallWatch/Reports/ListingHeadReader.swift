// ListingHeadReader: the listing members of a version 2 report's head, read from its bytes without JSONDecoder.
import Foundation

/// Reads the `head` object of a version 2 report file into ``ReportDocumentV2/ListingHead`` in one pass over its
/// bytes, skipping the members listings do not use.
///
/// JSONDecoder costs most of a listing's time: it maps the whole head, then decodes it through Codable's
/// containers. This accepts only what StallWatch's encoder writes; anything else (an escape in a string, a value
/// of an unexpected type, an unknown status, a missing member, a number it cannot read exactly) gives nil and
/// the caller decodes the head with JSONDecoder, which reads it or names what is wrong. So the fast path never
/// changes what a listing shows, only how quickly.
struct ListingHeadReader {
    private let bytes: UnsafeRawBufferPointer
    private var index: Int

    /// The listing head of `bytes`, which hold at least `{"schemaVersion":2,"head":{…}` (``ReportHeadPrefix``).
    static func listingHead(_ bytes: UnsafeRawBufferPointer) -> ReportDocumentV2.ListingHead? {
        guard ReportHeadPrefix.isVersion2(bytes) else { return nil }
        var reader = ListingHeadReader(bytes: bytes, index: ReportHeadPrefix.opening.count - 1)
        return reader.head()
    }

    private mutating func head() -> ReportDocumentV2.ListingHead? {
        var id: String?, status: StallReport.Status?, severity: StallReport.Severity?, startedAt: Date?
        var endedAt: Date?, durationMs: Double?, loop: ReportDocumentV2.ListingHead.Loop?
        var process: ReportDocumentV2.ListingHead.Process?, signature: String?
        var cause: ReportDocumentV2.ListingHead.Cause?, occurrences: Int?, firstSeen: Date?, lastSeen: Date?
        var maxDurationMs: Double?, totalDurationMs: Double?, sampleOffsetsMs: [Double]?, topFrame: StackFrame?
        var startedBeforeAttach: Bool?
        let complete = members { reader, key in
            switch key {
            case "id": id = reader.string()
            case "status": status = reader.string().flatMap(StallReport.Status.init(rawValue:))
            case "severity": severity = reader.string().flatMap(StallReport.Severity.init(rawValue:))
            case "startedAt": startedAt = reader.date()
            case "endedAt": return reader.optional(&endedAt) { $0.date() }
            case "durationMs": durationMs = reader.double()
            case "loop": loop = reader.loop()
            case "process": process = reader.process()
            case "signature": signature = reader.string()
            case "cause": return reader.optional(&cause) { $0.cause() }
            case "occurrences": return reader.optional(&occurrences) { $0.integer().flatMap { Int(exactly: $0) } }
            case "firstSeen": return reader.optional(&firstSeen) { $0.date() }
            case "lastSeen": return reader.optional(&lastSeen) { $0.date() }
            case "maxDurationMs": return reader.optional(&maxDurationMs) { $0.double() }
            case "startedBeforeAttach": return reader.optional(&startedBeforeAttach) { $0.bool() }
            case "totalDurationMs": return reader.optional(&totalDurationMs) { $0.double() }
            case "sampleOffsetsMs": sampleOffsetsMs = reader.doubles()
            case "topFrame": return reader.optional(&topFrame) { $0.frame() }
            default: return reader.skipValue()
            }
            return true
        }
        guard complete, let id, let status, let severity, let startedAt, let durationMs, let loop, let process,
            let signature, let sampleOffsetsMs
        else { return nil }
        return ReportDocumentV2.ListingHead(
            id: id, status: status, severity: severity, startedAt: startedAt, endedAt: endedAt,
            durationMs: durationMs, loop: loop, process: process, signature: signature, cause: cause,
            occurrences: occurrences, firstSeen: firstSeen, lastSeen: lastSeen, maxDurationMs: maxDurationMs,
            startedBeforeAttach: startedBeforeAttach, totalDurationMs: totalDurationMs,
            sampleOffsetsMs: sampleOffsetsMs, topFrame: topFrame)
    }

    private mutating func loop() -> ReportDocumentV2.ListingHead.Loop? {
        var name: String?, phase: String?, threadId: Int32?, iteration: UInt64?
        let complete = members { reader, key in
            switch key {
            case "name": name = reader.string()
            case "phase": phase = reader.string()
            case "threadId": threadId = reader.integer().flatMap { Int32(exactly: $0) }
            case "iteration": iteration = reader.unsigned()
            default: return reader.skipValue()
            }
            return true
        }
        guard complete, let name, let phase, let threadId, let iteration else { return nil }
        return .init(name: name, phase: phase, threadId: threadId, iteration: iteration)
    }

    private mutating func process() -> ReportDocumentV2.ListingHead.Process? {
        var pid: Int32?, executable: String?
        let complete = members { reader, key in
            switch key {
            case "pid": pid = reader.integer().flatMap { Int32(exactly: $0) }
            case "executable": executable = reader.string()
            default: return reader.skipValue()
            }
            return true
        }
        guard complete, let pid, let executable else { return nil }
        return .init(pid: pid, executable: executable)
    }

    private mutating func cause() -> ReportDocumentV2.ListingHead.Cause? {
        var kind: StallReport.Cause.Kind?
        let complete = members { reader, key in
            if key == "kind" {
                kind = reader.string().flatMap(StallReport.Cause.Kind.init(rawValue:))
                return true
            }
            return reader.skipValue()
        }
        guard complete, let kind else { return nil }
        return .init(kind: kind)
    }

    private mutating func frame() -> StackFrame? {
        var address: UInt64?, frame = StackFrame(address: 0)
        let complete = members { reader, key in
            switch key {
            case "address": address = reader.string().flatMap(UInt64.init(hexAddress:))
            case "image": return reader.optional(&frame.image) { $0.string() }
            case "offset": return reader.optional(&frame.offset) { $0.string().flatMap(UInt64.init(hexAddress:)) }
            case "symbol": return reader.optional(&frame.symbol) { $0.string() }
            case "symbolOffset":
                return reader.optional(&frame.symbolOffset) { $0.integer().flatMap { Int(exactly: $0) } }
            case "file": return reader.optional(&frame.file) { $0.string() }
            case "line": return reader.optional(&frame.line) { $0.integer().flatMap { Int(exactly: $0) } }
            case "shortSymbol": return reader.optional(&frame.shortSymbol) { $0.string() }
            default: return reader.skipValue()
            }
            return address != nil
        }
        guard complete, let address else { return nil }
        frame.address = address
        return frame
    }

    // MARK: - Values

    /// Calls `body` with each member's key, positioned at its value, which `body` consumes; false when the
    /// object is malformed or `body` gives up (returns false, or reads a required value as nil).
    private mutating func members(_ body: (inout ListingHeadReader, String) -> Bool) -> Bool {
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return false }
        skipSpace()
        if take(UInt8(ascii: "}")) { return true }
        while true {
            skipSpace()
            guard let key = string() else { return false }
            skipSpace()
            guard take(UInt8(ascii: ":")) else { return false }
            skipSpace()
            let start = index
            guard body(&self, key), index > start else { return false }
            skipSpace()
            if take(UInt8(ascii: ",")) { continue }
            return take(UInt8(ascii: "}"))
        }
    }

    /// `null` leaves `value` nil; anything else must read as a `T`.
    private mutating func optional<T>(_ value: inout T?, _ read: (inout ListingHeadReader) -> T?) -> Bool {
        if literal("null") { return true }
        value = read(&self)
        return value != nil
    }

    /// A string without escapes or control characters, valid UTF-8; nil otherwise.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            index += 1
        }
        return nil
    }

    private mutating func bool() -> Bool? {
        if literal("true") { return true }
        return literal("false") ? false : nil
    }

    private mutating func date() -> Date? { string().flatMap(ReportDate.date(from:)) }

    /// The characters of a JSON number, as text.
    private mutating func numberText() -> String? {
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                UInt8(ascii: "e"), UInt8(ascii: "E"):
                index += 1
            default:
                return index > start
                    ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self) : nil
            }
        }
        return nil
    }

    private mutating func double() -> Double? {
        guard let text = numberText(), let value = Double(text), value.isFinite else { return nil }
        return value
    }

    private mutating func integer() -> Int64? { numberText().flatMap { Int64($0) } }
    private mutating func unsigned() -> UInt64? { numberText().flatMap { UInt64($0) } }

    private mutating func doubles() -> [Double]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var values: [Double] = []
        skipSpace()
        if take(UInt8(ascii: "]")) { return values }
        while true {
            skipSpace()
            guard let value = double() else { return nil }
            values.append(value)
            skipSpace()
            if take(UInt8(ascii: ",")) { continue }
            return take(UInt8(ascii: "]")) ? values : nil
        }
    }

    /// Steps over one value of any kind (strings may hold escapes here: they are not read).
    private mutating func skipValue() -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            index += 1
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: "\\") {
                    index += 2
                    continue
                }
                index += 1
                if bytes[index - 1] == UInt8(ascii: "\"") { return true }
            }
            return false
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    guard skipValue() else { return false }
                    continue
                }
                index += 1
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 { return true }
                }
            }
            return false
        default:
            if literal("null") || literal("true") || literal("false") { return true }
            return numberText() != nil
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipSpace() {
        while index < bytes.count,
            bytes[index] == 0x20 || bytes[index] == 0x0a || bytes[index] == 0x0d || bytes[index] == 0x09
        {
            index += 1
        }
    }
}
