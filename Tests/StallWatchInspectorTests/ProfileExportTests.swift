// Tests of `stallwatch reports export`: folded stacks add up, speedscope validates, pprof decodes.
import Foundation
import StallWatch
import StallWatchCommands
import StallWatchInspector
import StallWatchTestSupport
import Testing

/// Runs `python3` with arguments; returns the exit status, standard output and standard error.
func runPython(_ arguments: [String], input: Data? = nil) throws -> (Int32, Data, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3"] + arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Read both pipes fully before waiting, so a large output cannot block the child.
    let errorData = Thread.detachedRead(errors.fileHandleForReading)
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, data, String(decoding: errorData(), as: UTF8.self))
}

extension Thread {
    /// Reads a handle to its end on another thread; the returned function waits for the result.
    static func detachedRead(_ handle: FileHandle) -> () -> Data {
        let box = DataBox()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            box.data = handle.readDataToEndOfFile()
            done.signal()
        }
        return {
            done.wait()
            return box.data
        }
    }
}

final class DataBox: @unchecked Sendable { var data = Data() }

@Suite(.offPool) struct ProfileExportTests {
    let reports = ReportFixtures.reportsDirectory.path
    let sampleCount = ReportFixtures.all.map(\.report.samples.count).reduce(0, +)

    func temporaryFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("sw-export-\(UUID().uuidString)-\(name)").path
    }

    @Test func foldedStacksParseAndSumToTheSampleCount() throws {
        let (code, output) = CapturedConsole.run(["reports", "export", reports, "--format", "folded"])
        #expect(code == .ok)
        var total = 0
        for line in output.standardOutput.split(separator: "\n") {
            let space = try #require(line.lastIndex(of: " "), "no count in \(line)")
            let count = try #require(Int(line[line.index(after: space)...]))
            #expect(count > 0)
            #expect(!line[..<space].isEmpty)
            total += count
        }
        #expect(total == sampleCount)
        #expect(
            output.standardOutput.contains(
                "libdispatch.so + 0x1b2c0;closure #1 () -> () in ChatDemo.Server.handle(request: ChatDemo.Request) -> ();"
                    + "ChatDemo.SessionList.sortAndFilter() -> ();__memmove_avx_unaligned_erms 1\n"),
            "root first, leaf last")
        #expect(output.standardOutput.contains("\nChatDemo.Store.save() throws -> () 1\n"), "machinery trimmed")
        #expect(output.standardOutput.contains("[no stack] 1\n"), "failed samples keep their time")
    }

    @Test func speedscopeOutputValidatesAgainstTheSchema() throws {
        try #require(ReportFormatTests.jsonschemaAvailable, ReportFormatTests.jsonschemaMissing)
        let file = temporaryFile("profile.speedscope.json")
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (code, _) = CapturedConsole.run(["reports", "export", reports, "--format", "speedscope", "-o", file])
        #expect(code == .ok)
        let schema = ReportFixtures.directory.appendingPathComponent("schemas/speedscope-file-format.schema.json").path
        let (status, _, errors) = try runPython([
            "-c",
            "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))",
            file, schema,
        ])
        #expect(status == 0, "\(errors)")

        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        let frames = try #require((object["shared"] as? [String: Any])?["frames"] as? [[String: Any]])
        let profiles = try #require(object["profiles"] as? [[String: Any]])
        #expect(profiles.count == 3)
        let samples = profiles.compactMap { $0["samples"] as? [[Int]] }.joined()
        #expect(samples.count == sampleCount)
        let ended = try #require(profiles.first { ($0["name"] as? String)?.hasPrefix("20261130T221500.123Z") == true })
        let first = try #require((ended["samples"] as? [[Int]])?.first)
        #expect(frames[first.first!]["name"] as? String == "libdispatch.so + 0x1b2c0", "stacks are root first")
        #expect(frames[first.last!]["name"] as? String == "__memmove_avx_unaligned_erms")
        #expect(ended["weights"] as? [Double] == [50, 50])
    }

    @Test func pprofOutputIsGzipThatAProtobufDecoderReadsBack() throws {
        let file = temporaryFile("profile.pb.gz")
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (code, _) = CapturedConsole.run(["reports", "export", reports, "--format", "pprof", "-o", file])
        #expect(code == .ok)
        // Python's gzip module is an independent inflater and checks the CRC and length.
        let (status, payload, errors) = try runPython([
            "-c", "import gzip, sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1], 'rb').read()))", file,
        ])
        try #require(status == 0, "\(errors)")
        let profile = try PprofProfile(Array(payload))
        #expect(profile.strings.first == "")
        #expect(profile.sampleTypes == [["samples", "count"], ["wall", "nanoseconds"]])
        #expect(profile.samples.count == sampleCount)
        #expect(profile.samples.allSatisfy { $0.values.count == 2 && $0.values[0] == 1 && $0.values[1] == 50_000_000 })
        #expect(Set(profile.samples.compactMap { $0.labels["report"] }) == Set(ReportFixtures.all.map(\.report.id)))
        // Every location, mapping and function an id points to exists.
        for sample in profile.samples {
            for id in sample.locationIDs { #expect(profile.locations[id] != nil) }
        }
        for location in profile.locations.values {
            if location.mappingID != 0 { #expect(profile.mappings[location.mappingID] != nil) }
            #expect(profile.functions[location.functionID] != nil)
        }
        // The ended stall's first sample, leaf first, with addresses, names, files and lines.
        let ended = try #require(profile.samples.first { $0.labels["report"] == "20261130T221500.123Z-4242-3" })
        let leaf = try #require(profile.locations[ended.locationIDs[0]])
        #expect(leaf.address == 0x7f3a_1229_e3c8)
        #expect(profile.functions[leaf.functionID]?.name == "__memmove_avx_unaligned_erms")
        let libc = try #require(profile.mappings[leaf.mappingID])
        #expect(libc.file == ReportFixtures.libc)
        #expect(libc.buildID == "93ac61ec5a8eb1396f9fbd350e3169a558528a40")
        #expect(libc.start == 0x7f3a_1220_0000)
        #expect(libc.limit == 0x7f3a_1220_0000 + 0x1e1000)
        let caller = try #require(profile.locations[ended.locationIDs[1]])
        #expect(caller.line == 42)
        #expect(profile.functions[caller.functionID]?.file == "/src/chat-demo/Sources/ChatDemo/SessionList.swift")
        #expect(profile.periodType == ["wall", "nanoseconds"])
    }

    @Test func gzipReallyCompressesALargeProfileAndAnotherReaderInflatesIt() throws {
        let file = temporaryFile("big.gz")
        defer { try? FileManager.default.removeItem(atPath: file) }
        var exporter = PprofExporter()
        var report = ReportFixtures.endedStall
        for index in 0..<3000 {
            report.samples[0].frames[0].address = UInt64(0x7f3a_1229_0000 + index)
            exporter.add(report)
        }
        let data = exporter.data()
        try data.write(to: URL(fileURLWithPath: file))
        let (status, output, errors) = try runPython([
            "-c", "import gzip, sys; print(len(gzip.decompress(open(sys.argv[1], 'rb').read())))", file,
        ])
        #expect(status == 0, "\(errors)")
        let inflated = try #require(
            Int(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(inflated > 3 * data.count, "\(data.count) bytes for \(inflated): deflated, not stored")
    }

    @Test func exportNeedsAKnownFormatAndAReport() {
        #expect(CapturedConsole.run(["reports", "export", reports]).0 == .usage)
        #expect(CapturedConsole.run(["reports", "export", reports, "--format", "svg"]).0 == .usage)
        let (code, output) = CapturedConsole.run(["reports", "export", "/nonexistent/x", "--format", "folded"])
        #expect(code == .notFound)
        #expect(output.standardError == "stallwatch: no reports: /nonexistent/x does not exist\n")
    }
}

/// The parts of a decoded pprof `Profile` the tests look at; ids resolved through the string table.
struct PprofProfile {
    struct Sample {
        var locationIDs: [UInt64] = []
        var values: [Int64] = []
        var labels: [String: String] = [:]
    }
    struct Location {
        var mappingID: UInt64 = 0
        var address: UInt64 = 0
        var functionID: UInt64 = 0
        var line: Int64 = 0
    }
    struct Mapping {
        var start: UInt64 = 0
        var limit: UInt64 = 0
        var file = ""
        var buildID = ""
    }
    struct Function {
        var name = ""
        var file = ""
    }

    var strings: [String] = []
    var sampleTypes: [[String]] = []
    var periodType: [String] = []
    var samples: [Sample] = []
    var locations: [UInt64: Location] = [:]
    var mappings: [UInt64: Mapping] = [:]
    var functions: [UInt64: Function] = [:]

    init(_ bytes: [UInt8]) throws {
        let fields = try ProtobufReader.fields(bytes[...])
        strings = fields.filter { $0.number == 6 }.map { String(decoding: $0.bytes, as: UTF8.self) }
        func string(_ index: UInt64) -> String {
            Int(index) < strings.count ? strings[Int(index)] : "<bad index \(index)>"
        }
        func valueType(_ bytes: ArraySlice<UInt8>) throws -> [String] {
            let inner = try ProtobufReader.fields(bytes)
            return [1, 2].map { number in string(inner.first { $0.number == number }?.varint ?? 0) }
        }
        for field in fields {
            switch field.number {
            case 1: sampleTypes.append(try valueType(field.bytes))
            case 11: periodType = try valueType(field.bytes)
            case 2:
                var sample = Sample()
                for inner in try ProtobufReader.fields(field.bytes) {
                    switch inner.number {
                    case 1: sample.locationIDs += try ProtobufReader.packed(inner)
                    case 2: sample.values += try ProtobufReader.packed(inner).map { Int64(bitPattern: $0) }
                    case 3:
                        let label = try ProtobufReader.fields(inner.bytes)
                        let key = string(label.first { $0.number == 1 }?.varint ?? 0)
                        sample.labels[key] = string(label.first { $0.number == 2 }?.varint ?? 0)
                    default: break
                    }
                }
                samples.append(sample)
            case 3:
                var mapping = Mapping()
                var id: UInt64 = 0
                for inner in try ProtobufReader.fields(field.bytes) {
                    switch inner.number {
                    case 1: id = inner.varint
                    case 2: mapping.start = inner.varint
                    case 3: mapping.limit = inner.varint
                    case 5: mapping.file = string(inner.varint)
                    case 6: mapping.buildID = string(inner.varint)
                    default: break
                    }
                }
                mappings[id] = mapping
            case 4:
                var location = Location()
                var id: UInt64 = 0
                for inner in try ProtobufReader.fields(field.bytes) {
                    switch inner.number {
                    case 1: id = inner.varint
                    case 2: location.mappingID = inner.varint
                    case 3: location.address = inner.varint
                    case 4:
                        let line = try ProtobufReader.fields(inner.bytes)
                        location.functionID = line.first { $0.number == 1 }?.varint ?? 0
                        location.line = Int64(bitPattern: line.first { $0.number == 2 }?.varint ?? 0)
                    default: break
                    }
                }
                locations[id] = location
            case 5:
                var function = Function()
                var id: UInt64 = 0
                for inner in try ProtobufReader.fields(field.bytes) {
                    switch inner.number {
                    case 1: id = inner.varint
                    case 2: function.name = string(inner.varint)
                    case 4: function.file = string(inner.varint)
                    default: break
                    }
                }
                functions[id] = function
            default: break
            }
        }
    }
}

/// A minimal protocol-buffer wire-format reader: varint and length-delimited fields (all profile.proto uses).
enum ProtobufReader {
    struct Field {
        var number: Int
        var wireType: Int
        var varint: UInt64 = 0
        var bytes: ArraySlice<UInt8> = []
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    static func varint(_ bytes: ArraySlice<UInt8>, _ index: inout Int) throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.endIndex, shift < 64 else { throw Malformed(description: "truncated varint") }
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }

    static func fields(_ bytes: ArraySlice<UInt8>) throws -> [Field] {
        var index = bytes.startIndex
        var fields: [Field] = []
        while index < bytes.endIndex {
            let key = try varint(bytes, &index)
            var field = Field(number: Int(key >> 3), wireType: Int(key & 7))
            switch field.wireType {
            case 0: field.varint = try varint(bytes, &index)
            case 2:
                let length = Int(try varint(bytes, &index))
                guard length >= 0, index + length <= bytes.endIndex else {
                    throw Malformed(description: "field overruns")
                }
                field.bytes = bytes[index..<index + length]
                index += length
            default: throw Malformed(description: "unexpected wire type \(field.wireType)")
            }
            fields.append(field)
        }
        return fields
    }

    /// A repeated varint field, packed (wire type 2) or not.
    static func packed(_ field: Field) throws -> [UInt64] {
        guard field.wireType == 2 else { return [field.varint] }
        var index = field.bytes.startIndex
        var values: [UInt64] = []
        while index < field.bytes.endIndex { values.append(try varint(field.bytes, &index)) }
        return values
    }
}
