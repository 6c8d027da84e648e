// SpeedscopeExporter: reports as a speedscope file (https://www.speedscope.app/file-format-schema.json).
import Foundation
import StallWatch

/// One speedscope "sampled" profile per report, frames shared across them, stacks outermost first, each
/// sample weighted by the sampling interval in milliseconds.
public struct SpeedscopeExporter: ProfileExporter {
    struct File: Encodable {
        let schema = "https://www.speedscope.app/file-format-schema.json"
        var exporter: String
        var name: String
        var activeProfileIndex: Int
        var shared: Shared
        var profiles: [Profile]

        enum CodingKeys: String, CodingKey {
            case schema = "$schema"
            case exporter, name, activeProfileIndex, shared, profiles
        }
    }

    struct Shared: Encodable { var frames: [Frame] }

    struct Frame: Encodable {
        var name: String
        var file: String?
        var line: Int?
    }

    struct Profile: Encodable {
        let type = "sampled"
        var name: String
        let unit = "milliseconds"
        var startValue: Double
        var endValue: Double
        var samples: [[Int]]
        var weights: [Double]
    }

    private var frames: [Frame] = []
    private var frameIndex: [String: Int] = [:]
    private var profiles: [Profile] = []
    private var longest: (index: Int, durationMs: Double)?

    public init() {}

    public mutating func add(_ report: StallReport) {
        let weight = ProfileStacks.sampleWeightMs(of: report)
        var stacks: [[Int]] = []
        for sample in ProfileStacks.samples(of: report) {
            stacks.append(sample.frames.reversed().map { index(of: $0) })
        }
        let name =
            "\(report.id) (\(ReportTextFormat.duration(report.durationMs, status: report.status)), "
            + "\(report.loop.phase), \(ApplicationFrame.imageName(report.process.executable)))"
        profiles.append(
            Profile(
                name: name, startValue: 0, endValue: weight * Double(stacks.count), samples: stacks,
                weights: Array(repeating: weight, count: stacks.count)))
        if report.durationMs > longest?.durationMs ?? -1 { longest = (profiles.count - 1, report.durationMs) }
    }

    public func data() throws -> Data {
        let name = profiles.count == 1 ? "stall \(profiles[0].name)" : "\(profiles.count) stalls"
        let file = File(
            exporter: "stallwatch", name: name, activeProfileIndex: longest?.index ?? 0,
            shared: Shared(frames: frames), profiles: profiles)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(file)
        data.append(UInt8(ascii: "\n"))
        return data
    }

    private mutating func index(of frame: StackFrame) -> Int {
        let key = CallTree.functionKey(frame)
        if let known = frameIndex[key] { return known }
        frames.append(Frame(name: CallTreeView.functionName(frame), file: frame.file, line: frame.line))
        frameIndex[key] = frames.count - 1
        return frames.count - 1
    }
}
