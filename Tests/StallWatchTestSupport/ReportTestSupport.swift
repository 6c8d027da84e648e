// Helpers for the report writer and store tests: a scratch directory and a small valid report.
import Foundation
import StallWatch

/// A fresh directory under the temporary directory, removed by `remove()`.
package struct ScratchDirectory {
    package let path: String

    package init() throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("stallwatch-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    package func file(_ name: String) -> String { path + "/" + name }

    package func names() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: path).sorted() }

    package func remove() { try? FileManager.default.removeItem(atPath: path) }
}

package enum ReportSamples {
    /// A small report; `id` decides its file name.
    package static func report(
        id: String, status: StallReport.Status = .ended, startedAt: Date = Date(timeIntervalSince1970: 1_790_000_000)
    )
        -> StallReport
    {
        StallReport(
            id: id, status: status, severity: .stall, startedAt: startedAt,
            endedAt: status == .ended ? startedAt.addingTimeInterval(0.3) : nil, durationMs: 300,
            detection: .init(
                source: "in-process", strategy: .deadline, thresholdMs: 250, hangThresholdMs: 5000,
                detectedAt: startedAt.addingTimeInterval(0.251), latencyMs: 1),
            process: .init(pid: 42, executable: "/usr/bin/demo", buildId: nil, host: "test"),
            loop: .init(name: "main", threadId: 42, phase: "beforeSources", iteration: 7),
            samples: [
                .init(offsetMs: 251, frames: [StackFrame(address: 0x1000, image: "/usr/bin/demo", offset: 0x1000)])
            ],
            images: [ImageInfo(path: "/usr/bin/demo", buildId: nil, base: 0x0, size: 0x2000)], signature: "abc",
            capture: .init(method: "signal", sampleIntervalMs: 50, samplesTaken: 1))
    }

    package static func mode(of path: String) -> mode_t {
        var info = stat()
        lstat(path, &info)
        return info.st_mode & 0o7777
    }
}

extension StallReport.Cause {
    /// Whether this is the documented verdict for a CPU-bound stall on a machine that kept the thread off the CPU:
    /// `starved`, with the run queue's wait as its evidence and the finding that without that wait the stall would
    /// have stayed under the threshold. A spin that must last a fixed time gets this verdict when other work holds
    /// the cores (a loaded CI machine), and only then.
    package var isStarvedByTheMachine: Bool {
        guard kind == .starved, evidence.contains(where: { $0.hasSuffix("the machine held the loop up") }) else {
            return false
        }
        // The run queue's figures, captures that waited for the thread woken from its wait to get a CPU, or page
        // faults that waited behind other processes' disk I/O.
        return evidence.contains { $0.contains("for a CPU (run queue)") && !$0.contains("the machine held") }
            || evidence.contains { $0.contains("and waiting for a CPU: the capture waited") }
            || (evidence.contains { $0.contains("in a page fault, not a system call") }
                && evidence.contains { $0.contains("of it other processes' I/O") })
    }

    /// Whether this is an I/O verdict resting only on samples that found the loop thread in a page fault: waiting
    /// for the disk to read in code or data it touched (a program starting up on a machine whose disk other
    /// processes keep busy), not in a call of its own.
    package var isPageFaultsOnly: Bool {
        guard kind == .io,
            let faults = evidence.first(where: {
                $0.hasSuffix(
                    "in a page fault, not a system call: waiting for the disk to read in code or data the thread touched"
                )
            }),
            let inIO = evidence.first(where: { $0.contains(" samples: in I/O") })
        else { return false }
        // "13 of 14 samples: …"
        func counts(_ line: String) -> (Int, Int)? {
            let words = line.split(separator: " ")
            guard words.count > 3, let n = Int(words[0]), let total = Int(words[2]) else { return nil }
            return (n, total)
        }
        guard let (n, _) = counts(faults), let (io, _) = counts(inIO) else { return false }
        return n == io
    }

    /// Whether this cause is `expected`, or — for an expected `cpu` — a verdict of the machine holding the loop up:
    /// the run-queue `starved` verdict above, or I/O resting only on page faults (its code read back in from a disk
    /// other processes keep busy, `isPageFaultsOnly`).
    package func matches(_ expected: Kind) -> Bool {
        kind == expected || (expected == .cpu && (isStarvedByTheMachine || isPageFaultsOnly))
    }
}

extension Array where Element == StallReport {
    /// The reports that blame the program watched, for an injected stall of cause `expected`: all but the machine's
    /// own verdicts (``StallReport/Cause/isStarvedByTheMachine``, ``StallReport/Cause/isPageFaultsOnly``), which
    /// a loaded machine may add for a loop it held up on its own. A spin that must last a fixed time gets one of
    /// those verdicts itself when other work holds the cores: for an expected `cpu`, when the machine's verdicts are
    /// all there is, they are the injected stall's reports.
    package func blamingTheProgram(expecting expected: StallReport.Cause.Kind) -> [StallReport] {
        let machine = { (r: StallReport) in
            r.cause?.isStarvedByTheMachine == true || r.cause?.isPageFaultsOnly == true
        }
        let blaming = filter { !machine($0) }
        return blaming.isEmpty && (expected == .cpu || expected == .starved) ? self : blaming
    }
}
