// Hostile report content shown at a real terminal (a pty): nothing but StallWatch's own colour reaches it.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

@Suite(.offPool) struct TerminalInjectionTests {
    /// Window title, clear screen, a fake "cause lock" line, a one-byte CSI, a bidi override, BEL.
    static let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{1B}[H\ncause   lock\r\u{9B}31m\u{202E}desrever\u{7F}"

    static func hostileReport() -> StallReport {
        var report = ReportFixtures.diagnosedLock
        report.id = "20261201T100000.000Z-4242-66"
        report.annotations = ["request" + hostile: "GET /" + hostile]
        report.loop.name = "main" + hostile
        report.loop.phase = hostile
        report.notes.append(hostile)
        report.cause?.evidence.append(hostile)
        report.capture.errors.append(hostile)
        report.signature = "sig" + hostile
        report.samples[0].frames[2].symbol = "Evil.\(hostile)()"
        report.samples[0].error = hostile
        report.threads?[1].name = hostile
        report.pointStack?.frames[0].symbol = hostile
        report.leadUp?.items[0].label = hostile
        report.leadUp?.topItems[0].label = hostile
        report.leadUp?.inFlight?.label = hostile
        report.leadUp?.buckets.longestLabel[0] = hostile
        report.leadUp?.findings.append(hostile)
        // What other processes name themselves and hold: their names, states and stacks.
        report.cause?.blockingProcess = .init(
            processId: 5151, name: hostile, reason: hostile, threadId: 5152, state: hostile,
            frames: [StackFrame(address: 0x7f00_0000_1000, symbol: hostile, shortSymbol: hostile)])
        report.cause?.candidateHolders = [.init(threadId: 4250, name: hostile, reason: hostile, confidence: .possible)]
        return report
    }

    @Test func escapingMakesEveryDangerousCodepointVisibleAndIsIdempotent() {
        let escaped = TerminalText.escape(Self.hostile)
        #expect(!escaped.unicodeScalars.contains(where: TerminalText.isDangerous))
        #expect(escaped.hasPrefix("\\x1B]0;owned\\x07\\x1B[2J"))
        #expect(escaped.contains("\\x9B31m") && escaped.contains("\\u{202E}") && escaped.contains("\\x0A"))
        #expect(TerminalText.escape(escaped) == escaped)
        #expect(TerminalText.escape("plain ünïcödé → ok") == "plain ünïcödé → ok")
    }

    @Test(.timeLimit(.minutes(3)))
    func aTerminalSeesNoRawEscapeFromHostileReports() throws {
        let directory = HostileFiles.temporaryDirectory("pty")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/hostile.json"
        try Self.hostileReport().encodedJSON().write(to: URL(fileURLWithPath: file))
        // A file name is report content too when a warning prints it.
        try Data("{".utf8).write(to: URL(fileURLWithPath: directory + "/bad\u{1B}[2J.json"))
        let script = """
            import os, pty, sys, subprocess, re
            out = b""
            for args in sys.argv[2:]:
                master, slave = pty.openpty()
                p = subprocess.Popen([sys.argv[1]] + args.split("\\x1f"), stdin=slave, stdout=slave, stderr=slave,
                                     env={"TZ": "UTC", "TERM": "xterm", "PATH": "/usr/bin:/bin"})
                os.close(slave)
                while True:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:
                        break
                    if not chunk:
                        break
                    out += chunk
                os.close(master)
                p.wait()
            text = out.decode("utf-8", "replace")
            colour = len(re.findall("\\x1b\\\\[[0-9;]*m", text))
            rest = re.sub("\\x1b\\\\[[0-9;]*m", "", text)
            bad = [c for c in rest if (ord(c) < 32 and c not in "\\r\\n") or 0x7f <= ord(c) <= 0x9f or c == "\\u202e"]
            print("colour=%d bad=%d bytes=%d" % (colour, len(bad), len(out)))
            print(repr(bad[:10]))
            """
        let commands = [
            ["reports", "show", file, "--all-threads"], ["reports", "list", directory],
            ["reports", "summary", directory], ["reports", "summary", directory, "--by", "frame"],
        ]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments =
            ["-c", script, HostileFiles.stallwatch] + commands.map { $0.joined(separator: "\u{1F}") }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        // The pty made the CLI colour its output (so this is what a terminal gets), and nothing else escaped.
        #expect(!output.hasPrefix("colour=0 "), "\(output)")
        #expect(output.contains(" bad=0 "), "\(output)")
    }
}
