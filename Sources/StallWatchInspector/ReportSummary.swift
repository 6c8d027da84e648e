// ReportSummary: the one-line digest of a report that `reports list` shows and `reports list --json` emits.
import Foundation
import StallWatch

/// A compact summary of one report, one row of `stallwatch reports list`.
public struct ReportSummary: Codable, Sendable, Equatable {
    public var id: String
    public var path: String
    public var startedAt: Date
    public var durationMs: Double
    public var severity: StallReport.Severity
    public var status: StallReport.Status
    public var phase: String
    public var loop: String
    public var pid: Int32
    public var executable: String
    /// The most telling frame of the first sample with frames (see ``topFrame(of:)``); nil with no frames.
    public var topFrame: String?
    public var signature: String
    public var samples: Int
    /// What the stall was stuck on (``causeKind(of:)``): `unknown` until the report says.
    public var cause: String

    public init(path: String, report: StallReport) {
        id = report.id
        self.path = path
        startedAt = report.startedAt
        durationMs = report.durationMs
        severity = report.severity
        status = report.status
        phase = report.loop.phase
        loop = report.loop.name
        pid = report.process.pid
        executable = report.process.executable
        topFrame = Self.topFrame(of: report)
        signature = report.signature
        samples = report.samples.count
        cause = Self.causeKind(of: report)
    }

    /// The kind of the report's cause (`cpu`, `lock`, `io`, …), `unknown` when the report has none.
    ///
    /// The one place that reads `cause.kind`, so `--cause`, `summary --by cause` and the list agree.
    public static func causeKind(of report: StallReport) -> String {
        report.cause?.kind.rawValue ?? "unknown"
    }

    /// Symbols that say nothing about the stall: signal trampolines, StallWatch's own C capture code (`sw_…`),
    /// and the run loop's idle wait.
    public static func isMachinery(_ symbol: String) -> Bool {
        ["__restore_rt", "__kernel_rt_sigreturn", "_sigtramp"].contains(symbol) || symbol.hasPrefix("sw_")
            || symbol.contains("idleWait")
    }

    /// The first frame with a symbol that is not machinery, as `symbol + offset`; failing that, the first frame
    /// in an image, as `image + offset`; failing that, the first address.
    public static func topFrame(of report: StallReport) -> String? {
        guard let (name, offset) = topFrameParts(of: report) else { return nil }
        return offset.map { "\(name) + \($0)" } ?? name
    }

    /// The function of ``topFrame(of:)`` without its `+ offset` (unless it has no symbol, where image + offset
    /// is all there is): what `summary --by frame` groups on.
    public static func topFunction(of report: StallReport) -> String? {
        guard let (name, offset) = topFrameParts(of: report) else { return nil }
        return name.hasPrefix("0x") || offset?.hasPrefix("0x") == true ? offset.map { "\(name) + \($0)" } ?? name : name
    }

    /// A shared library of the system or of the Swift runtime, whose frames say less about a stall than the
    /// first frame of the application's own code (`__lll_lock_wait` is where; the caller is why).
    public static func isSystemImage(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return path.hasPrefix("/lib/") || path.hasPrefix("/lib64/") || path.hasPrefix("/usr/lib/")
            || path.hasPrefix("/usr/lib64/") || path.contains("/swift/linux/") || name.hasPrefix("ld-linux")
            || name == "[vdso]"
    }

    private static func topFrameParts(of report: StallReport) -> (String, String?)? {
        guard let frames = report.pointStack?.frames ?? report.samples.first(where: { !$0.frames.isEmpty })?.frames
        else { return nil }
        if let own = frames.first(where: { frame in
            frame.symbol.map { !isMachinery($0) } ?? false && frame.image.map { !isSystemImage($0) } ?? false
        }), let symbol = own.symbol {
            return (symbol, own.symbolOffset.map(String.init))
        }
        if let named = frames.first(where: { $0.symbol.map { !isMachinery($0) } ?? false }), let symbol = named.symbol {
            return (symbol, named.symbolOffset.map(String.init))
        }
        if let placed = frames.first(where: { $0.image != nil && $0.offset != nil }), let image = placed.image,
            let offset = placed.offset
        {
            return (imageName(image), offset.hexAddress)
        }
        return frames.first.map { ($0.address.hexAddress, nil) }
    }

    /// The last path component of an image path (`/lib/x86_64-linux-gnu/libc.so.6` → `libc.so.6`).
    public static func imageName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
