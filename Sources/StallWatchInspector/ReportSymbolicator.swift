// ReportSymbolicator: fills in a report's missing symbols and file:line offline, from binaries matched by build-id.
import Foundation
import StallWatch

/// Symbolicates a stored report after the fact, on any machine that has the same binaries or their debug files.
///
/// For each image with frames that lack a symbol or a file:line, the file to read is chosen by the report's
/// build-id: the image's own path when the file there has that build-id, else the separate debug file
/// `<debugDirectory>/xx/yyyy….debug`. A file at the image's path with a different build-id is a different build
/// and is refused (symbols from it would be wrong, not missing). Values already in the report are kept.
public struct ReportSymbolicator {
    /// Where separate debug files are found by build-id (Debian's `-dbgsym` packages install there).
    package var debugDirectory: String

    /// What symbolication did besides the new report: one line per image left as it was.
    public struct Outcome: Sendable {
        public var report: StallReport
        /// Frames that gained a symbol or a file:line.
        public var framesFilled: Int
        /// The files symbols were read from.
        public var filesUsed: [String]
        public var warnings: [String]
    }

    public init(debugDirectory: String = "/usr/lib/debug/.build-id") {
        self.debugDirectory = debugDirectory
    }

    /// - Throws: ``InspectorError`` (`buildIDMismatch`) naming the image and both build-ids when a binary at an image's path
    ///   is a different build and no debug file with the right build-id exists.
    public func symbolicate(_ report: StallReport) throws(InspectorError) -> Outcome {
        var outcome = Outcome(report: report, framesFilled: 0, filesUsed: [], warnings: [])
        var wanted: [String] = []
        for sample in report.samples {
            for frame in sample.frames
            where frame.image != nil && frame.offset != nil
                && (frame.symbol == nil || frame.file == nil) && !wanted.contains(frame.image!)
            {
                wanted.append(frame.image!)
            }
        }
        var images: [String: ImageSymbols] = [:]
        for path in wanted {
            guard let file = try fileToRead(for: path, in: report, warnings: &outcome.warnings) else { continue }
            guard let symbols = SymbolCache.shared.symbols(ofFile: file) else {
                outcome.warnings.append("\(path): cannot read \(file) (not an ELF file libdw reads); left as is")
                continue
            }
            images[path] = symbols
            outcome.filesUsed.append(file)
        }
        var filledFrames: [StackFrame: StackFrame] = [:]
        for (sampleIndex, sample) in report.samples.enumerated() {
            for (frameIndex, frame) in sample.frames.enumerated() {
                guard let path = frame.image, let symbols = images[path], let offset = frame.offset else { continue }
                // Looked up as the frame's kind says: a return address inside its call, the program counter and
                // an async resume point (the first instruction of its partial function) as they are.
                let captured = UnwoundFrame(frame, innermost: frameIndex == 0)
                let back = offset == 0 ? 0 : captured.address &- captured.lookupAddress
                var filled = frame
                if filled.symbol == nil, let symbol = symbols.symbol(atOffset: offset - back) {
                    filled.symbol = symbol.name
                    filled.shortSymbol = symbol.shortName
                    filled.symbolOffset = Int(truncatingIfNeeded: symbol.offset + back)
                }
                if filled.file == nil, let source = symbols.sourceLine(atOffset: offset - back) {
                    filled.file = source.file
                    filled.line = source.line
                }
                if filled != frame {
                    outcome.framesFilled += 1
                    outcome.report.samples[sampleIndex].frames[frameIndex] = filled
                    if filledFrames[frame] == nil { filledFrames[frame] = filled }
                }
            }
        }
        // The point stack, call tree and thread snapshot repeat the samples' frames: every view reads them.
        outcome.report.replaceFrames(filledFrames)
        if outcome.framesFilled > 0 {
            outcome.report.notes.append(
                "Symbolicated offline by stallwatch reports symbolicate on \(ProcessInfo.processInfo.hostName): "
                    + "\(outcome.framesFilled) frames filled from \(outcome.filesUsed.joined(separator: ", ")).")
        }
        return outcome
    }

    /// The separate debug file for `buildID`: `<debugDirectory>/ab/cdef….debug`.
    func debugFile(forBuildID buildID: String) -> String {
        "\(debugDirectory)/\(buildID.prefix(2))/\(buildID.dropFirst(2)).debug"
    }

    private func fileToRead(for path: String, in report: StallReport, warnings: inout [String]) throws(InspectorError)
        -> String?
    {
        let expected =
            report.images.first { $0.path == path }?.buildId
            ?? (path == report.process.executable ? report.process.buildId : nil)
        guard let expected, expected.count >= 4 else {
            warnings.append("\(path): the report has no build-id for it, so no file can be checked; left as is")
            return nil
        }
        let local = FileManager.default.fileExists(atPath: path) ? BuildID.ofFile(atPath: path) : nil
        if local == expected { return path }
        let debug = debugFile(forBuildID: expected)
        if FileManager.default.fileExists(atPath: debug) { return debug }
        if FileManager.default.fileExists(atPath: path) {
            throw InspectorError(
                .buildIDMismatch,
                "refusing \(path): its build-id is \(local ?? "absent") but the report's is \(expected) (a different "
                    + "build); install the matching binary, or its debug file as \(debug)",
                context: ["path": path, "expected": expected, "found": local ?? "absent"])
        }
        warnings.append("\(path): not on this machine and no debug file \(debug); left as is")
        return nil
    }
}
