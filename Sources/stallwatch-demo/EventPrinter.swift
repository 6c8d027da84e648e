// Prints stall events as one JSON line each, for people and log shippers alike.
import Foundation
import StallWatch

enum EventPrinter {
    static func print(_ event: StallEvent) {
        var line: [String: Any] = [:]
        switch event {
        case .began(let r):
            line = ["event": "began", "id": r.id, "phase": r.loop.phase, "thresholdMs": r.detection.thresholdMs]
        case .sampled:
            return
        case .escalated(let r):
            line = ["event": "escalated", "id": r.id, "severity": r.severity.rawValue]
        case .ended(let r):
            line = [
                "event": "ended", "id": r.id, "status": r.status.rawValue, "durationMs": r.durationMs,
                "samples": r.samples.count, "top": topFrame(r) ?? "?",
            ]
        case .lateWakeup(let delay):
            line = ["event": "lateWakeup", "delayMs": delay]
        case .reportFailed(let error):
            line = ["event": "reportFailed", "error": error.message]
        }
        if let data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]),
            let text = String(data: data, encoding: .utf8)
        {
            FileHandle.standardOutput.write(Data((text + "\n").utf8))
        }
    }

    static func topFrame(_ report: StallReport) -> String? {
        report.samples.lazy.flatMap(\.frames).first { $0.symbol != nil }?.symbol
    }
}
