// watch/run/daemon event lines on a terminal: a sentence with the report's path; JSON otherwise.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchCommands

@Suite(.offPool) struct EventOutputTextTests {
    let ended: [String: JSONLinesEventWriter.Value] = [
        "event": .string("ended"), "id": .string("20261201T085722.142Z-26711-1"), "loop": .string("demo"),
        "pid": .int(26711), "durationMs": .double(752.94), "top": .string("static Stalls.sleepFor(milliseconds:)"),
        "cause": .string("sleep"), "samples": .int(11), "phase": .string("beforeTimers"),
    ]

    @Test func anEndedStallReadsAsASentenceWithTheReportsPath() {
        let text = EventOutput.text(ended, reportDirectory: "/var/tmp/stallwatch-0")
        #expect(
            text
                == "stall ended: loop demo (pid 26711) 752.9 ms in static Stalls.sleepFor(milliseconds:) [sleep], "
                + "11 samples; report /var/tmp/stallwatch-0/stall-20261201T085722.142Z-26711-1.json")
    }

    @Test func jsonOnATerminalOnlyWhenAskedAndAlwaysOffATerminal() throws {
        let lines = LockedLines()
        var console = Console(output: { lines.append($0) }, errorOutput: { _ in }, useColor: false)
        console.outputIsTerminal = true
        let human = EventOutput(console: console, arguments: Arguments(), reportDirectory: "/r")
        human.emit(ended)
        let asked = EventOutput(
            console: console,
            arguments: try Arguments.parse(
                ["--json"], flags: ["--json"], options: [],
                positionals: 0...0, command: "watch"), reportDirectory: "/r")
        asked.emit(ended)
        console.outputIsTerminal = false
        EventOutput(console: console, arguments: Arguments(), reportDirectory: "/r").emit(ended)
        let written = lines.all
        #expect(written.count == 3)
        #expect(written[0].hasPrefix("stall ended: "))
        #expect(written[1].hasPrefix("{") && written[2].hasPrefix("{"))
        #expect(written[1] == JSONLinesEventWriter.encode(ended) + "\n")
    }
}

/// Lines written by a console, collected under a lock.
final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
