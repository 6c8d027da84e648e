// PprofExporter: reports as a pprof profile (gzipped profile.proto), for `go tool pprof` and its web UI.
import Foundation
import StallWatch

/// One pprof `Profile` for any number of reports (gzipped with zlib, the reports' executable as the first
/// mapping, function names in the short style with the full demangled name as `system_name`): sample types `samples/count` and `wall/nanoseconds`, one
/// mapping per loaded image instance (path, build-id, load base), locations by address, functions by name and
/// file, and a `report` label on every sample naming the report it came from.
///
/// Field numbers follow `profile.proto` of github.com/google/pprof (`proto/profile.proto`).
public struct PprofExporter: ProfileExporter {
    private struct Mapping {
        var start: UInt64
        var limit: UInt64
        var file: Int
        var buildID: Int
        var hasFunctions: Bool
        var hasLines: Bool
    }

    private struct Location {
        var mapping: Int
        var address: UInt64
        var function: Int
        var line: Int
    }

    private struct Sample {
        var locations: [UInt64]
        var weightNanos: Int64
        var report: Int
    }

    private var strings: [String] = [""]
    private var stringIndex: [String: Int] = ["": 0]
    private var mappings: [Mapping] = []
    private var mappingIndex: [String: Int] = [:]
    private var functions: [(name: Int, systemName: Int, file: Int)] = []
    private var functionIndex: [String: Int] = [:]
    private var locations: [Location] = []
    private var locationIndex: [String: Int] = [:]
    private var samples: [Sample] = []
    private var firstStart: Date?
    private var lastEnd: Date?
    private var reports = 0
    private var periodNanos: Int64 = 0

    public init() {}

    public mutating func add(_ report: StallReport) {
        reports += 1
        let weight = Int64(saturating: ProfileStacks.sampleWeightMs(of: report) * 1_000_000)
        periodNanos = max(periodNanos, weight)
        let start = report.startedAt
        let end = start.addingTimeInterval(report.durationMs / 1000)
        firstStart = min(firstStart ?? start, start)
        lastEnd = max(lastEnd ?? end, end)
        let images = Dictionary(report.images.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        // pprof takes the first mapping for the main binary (its `File:` header): the report's executable.
        if mappings.isEmpty, images[report.process.executable] != nil {
            _ = mapping(for: StackFrame(address: 0, image: report.process.executable), images: images)
        }
        let label = string(report.id)
        for sample in ProfileStacks.samples(of: report) {
            let ids = sample.frames.map { UInt64(location(of: $0, images: images)) }
            samples.append(Sample(locations: ids, weightNanos: weight, report: label))
        }
    }

    public func data() -> Data {
        var strings = self.strings
        var index = stringIndex
        func id(_ text: String) -> Int64 {
            if let known = index[text] { return Int64(known) }
            strings.append(text)
            index[text] = strings.count - 1
            return Int64(strings.count - 1)
        }
        var profile = ProtobufWriter()
        for (type, unit) in [("samples", "count"), ("wall", "nanoseconds")] {
            profile.field(1) {
                $0.field(1, id(type)); $0.field(2, id(unit))
            }  // sample_type
        }
        let reportKey = id("report")
        for sample in samples {
            profile.field(2) { message in  // sample
                message.packed(1, sample.locations)  // location_id, leaf first
                message.packed(2, [1, UInt64(bitPattern: sample.weightNanos)])  // value
                message.field(3) {
                    $0.field(1, reportKey); $0.field(2, Int64(sample.report))
                }  // label
            }
        }
        for (number, mapping) in mappings.enumerated() {
            profile.field(3) { message in  // mapping
                message.field(1, number + 1)
                message.field(2, mapping.start)
                message.field(3, mapping.limit)
                message.field(5, mapping.file)
                message.field(6, mapping.buildID)
                message.field(7, mapping.hasFunctions)
                message.field(8, mapping.hasLines)
                message.field(9, mapping.hasLines)
            }
        }
        for (number, location) in locations.enumerated() {
            profile.field(4) { message in  // location
                message.field(1, number + 1)
                message.field(2, location.mapping)
                message.field(3, location.address)
                message.field(4) {
                    $0.field(1, location.function); $0.field(2, location.line)
                }  // line
            }
        }
        for (number, function) in functions.enumerated() {
            profile.field(5) { message in  // function
                message.field(1, number + 1)
                message.field(2, function.name)
                message.field(3, function.systemName)  // system_name: the full demangled name
                message.field(4, function.file)
            }
        }
        let comment = id("stallwatch export of \(reports) stall report\(reports == 1 ? "" : "s")")
        let periodType = (id("wall"), id("nanoseconds"))
        for text in strings { profile.field(6, string: text) }  // string_table; index 0 is ""
        // Strings interned above (comment, period type) were appended before string_table was written.
        if let firstStart { profile.field(9, Int64(saturating: firstStart.timeIntervalSince1970 * 1e9)) }  // time_nanos
        if let firstStart, let lastEnd {
            profile.field(10, Int64(saturating: lastEnd.timeIntervalSince(firstStart) * 1e9))  // duration_nanos
        }
        profile.field(11) {
            $0.field(1, periodType.0); $0.field(2, periodType.1)
        }  // period_type
        profile.field(12, periodNanos)  // period
        profile.packed(13, [UInt64(comment)])  // comment
        return Data(Gzip.wrap(profile.bytes))
    }

    // MARK: - Tables

    private mutating func string(_ text: String) -> Int {
        if let known = stringIndex[text] { return known }
        strings.append(text)
        stringIndex[text] = strings.count - 1
        return strings.count - 1
    }

    private mutating func mapping(for frame: StackFrame, images: [String: ImageInfo]) -> Int {
        guard let path = frame.image else { return 0 }
        let image = images[path]
        let base = image?.base ?? 0
        let key = "\(path)\u{1}\(image?.buildId ?? "")\u{1}\(base)"
        if let known = mappingIndex[key] {
            if frame.symbol != nil { mappings[known - 1].hasFunctions = true }
            if frame.line != nil { mappings[known - 1].hasLines = true }
            return known
        }
        mappings.append(
            Mapping(
                start: base, limit: base &+ (image?.size ?? 0), file: string(path),
                buildID: string(image?.buildId ?? ""),
                hasFunctions: frame.symbol != nil, hasLines: frame.line != nil))
        mappingIndex[key] = mappings.count
        return mappings.count
    }

    private mutating func location(of frame: StackFrame, images: [String: ImageInfo]) -> Int {
        let mapping = mapping(for: frame, images: images)
        let key = "\(mapping)\u{1}\(frame.address)\u{1}\(frame.symbol ?? "")"
        if let known = locationIndex[key] { return known }
        let name = CallTreeView.functionName(frame)
        let functionKey = name + "\u{1}" + (frame.file ?? "")
        let function: Int
        if let known = functionIndex[functionKey] {
            function = known
        } else {
            functions.append((string(name), string(frame.symbol ?? name), string(frame.file ?? "")))
            function = functions.count
            functionIndex[functionKey] = function
        }
        locations.append(
            Location(
                mapping: mapping, address: frame.address, function: function,
                line: frame.line ?? 0))
        locationIndex[key] = locations.count
        return locations.count
    }
}
