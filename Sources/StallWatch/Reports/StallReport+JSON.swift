// The one JSON encoding of stall reports: encoder/decoder factories and the report date format.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension StallReport {
    /// A new encoder in the expanded (version 1) format: pretty-printed, sorted keys, unescaped slashes, dates as ISO 8601
    /// UTC with milliseconds (`2026-11-30T22:15:00.123Z`). Absent optionals are omitted, not written as null.
    package static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ReportDate.string(from: date))
        }
        return encoder
    }

    /// A new decoder for the on-disk format. Dates may carry any number of fractional digits and a `Z` or
    /// `±HH:MM` suffix, so hand-edited or foreign-tool files still read.
    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ReportDate.date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "not an ISO 8601 date: \"\(text)\"")
            }
            return date
        }
        return decoder
    }

    /// The report as its file holds it: schema version 2 (see `ReportDocumentV2`), compact, a final newline.
    /// ``expandedJSON()`` gives the version 1 layout with every frame inline.
    /// - Throws: `StallWatchError(.report)` if a value cannot be encoded (a non-finite number).
    package func encodedJSON() throws(StallWatchError) -> Data {
        do {
            return try encodedVersion2()
        } catch {
            throw StallWatchError(.report, "cannot encode report \(id): \(error)", context: ["id": id])
        }
    }
}

/// The timestamp format of reports: ISO 8601, UTC, millisecond precision.
package enum ReportDate {
    /// `2026-11-30T22:15:00.123Z`; rounds to the nearest millisecond.
    package static func string(from date: Date) -> String {
        // Beyond year ±100000 (or not a number) `time_t` cannot hold it: say so instead of trapping.
        guard abs(date.timeIntervalSince1970) < 3e12 else { return "(date out of range)" }
        let totalMillis = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = (totalMillis / 1000).rounded(.down)
        let millis = Int(totalMillis - seconds * 1000)
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))"
            + "T\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))"
            + ".\(pad(millis, 3))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; nil for anything else.
    package static func date(from text: String) -> Date? {
        let bytes = Array(text.utf8)
        func number(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[start..<start + count] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        func byte(_ index: Int, is character: Character) -> Bool {
            index < bytes.count && bytes[index] == character.asciiValue!
        }
        guard let year = number(0, 4), byte(4, is: "-"), let month = number(5, 2), byte(7, is: "-"),
            let day = number(8, 2), byte(10, is: "T") || byte(10, is: "t"), let hour = number(11, 2),
            byte(13, is: ":"), let minute = number(14, 2), byte(16, is: ":"), let second = number(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var index = 19
        var fraction = 0.0
        if byte(index, is: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            if index == start { return nil }
        }
        var offsetSeconds = 0
        if byte(index, is: "Z") || byte(index, is: "z") {
            index += 1
        } else if byte(index, is: "+") || byte(index, is: "-"), let hours = number(index + 1, 2),
            byte(index + 3, is: ":"), let minutes = number(index + 4, 2)
        {
            offsetSeconds = (hours * 3600 + minutes * 60) * (byte(index, is: "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        // Keep millisecond values exact so that decode → encode reproduces the text.
        let millis = (fraction * 1000).rounded()
        return Date(timeIntervalSince1970: (Double(seconds - offsetSeconds) * 1000 + millis) / 1000)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
