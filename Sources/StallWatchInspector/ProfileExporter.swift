// ProfileExporter: what the folded, speedscope and pprof exporters share: one report at a time in, a file out.
import Foundation
import StallWatch

/// Turns stall reports into a profile file for another viewer. Reports are added one at a time (a directory is
/// streamed), and the file is produced at the end.
public protocol ProfileExporter {
    /// Adds every sample of `report`.
    mutating func add(_ report: StallReport)
    /// The file's bytes.
    func data() throws -> Data
}

/// The formats of `reports export --format`.
public enum ProfileFormat: String, Sendable, CaseIterable {
    /// `root;…;leaf count` lines, the input of flamegraph.pl and inferno.
    case folded
    /// speedscope's JSON file format, one sampled profile per report.
    case speedscope
    /// pprof's gzipped `profile.proto`.
    case pprof

    public func makeExporter() -> any ProfileExporter {
        switch self {
        case .folded: FoldedExporter()
        case .speedscope: SpeedscopeExporter()
        case .pprof: PprofExporter()
        }
    }
}

/// The stacks of a report as exporters see them: capture machinery trimmed from the inner end, and samples
/// without a stack given the one frame `[no stack]` so that their time is not lost.
enum ProfileStacks {
    /// The frame that stands for a sample whose stack could not be taken.
    static let noStack = StackFrame(address: 0, symbol: "[no stack]")

    /// Each sample's frames, innermost first, with its offset in the stall.
    static func samples(of report: StallReport) -> [(offsetMs: Double, frames: [StackFrame])] {
        report.samples.map { sample in
            let kept = sample.frames.drop(while: ReportDetailView.isMachinery)
            return (sample.offsetMs, kept.isEmpty ? [noStack] : Array(kept))
        }
    }

    /// The time one sample stands for: the sampling interval (1 ms when the report does not say).
    static func sampleWeightMs(of report: StallReport) -> Double {
        report.capture.sampleIntervalMs > 0 ? report.capture.sampleIntervalMs : 1
    }
}

/// Folded stacks: one line per distinct stack, `outermost;…;innermost count`, sorted.
public struct FoldedExporter: ProfileExporter {
    private var counts: [String: Int] = [:]

    public init() {}

    public mutating func add(_ report: StallReport) {
        for sample in ProfileStacks.samples(of: report) {
            let line = sample.frames.reversed().map { Self.name($0) }.joined(separator: ";")
            counts[line, default: 0] += 1
        }
    }

    public func data() -> Data {
        Data(counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)\n" }.joined().utf8)
    }

    /// A frame name that cannot break the format: `;` separates frames and a newline ends the line.
    static func name(_ frame: StackFrame) -> String {
        CallTreeView.functionName(frame).replacingOccurrences(of: ";", with: ":")
            .replacingOccurrences(of: "\n", with: " ")
    }
}
