// The OS layer's /proc parsers: each file format read in one place, checked on real and on hostile lines.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ProcReadingTests {
    @Test func statCountsFieldsFromTheLastParenthesisOfTheName() throws {
        let line = "4242 (evil) S (x) 1) R 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 987654 1000 200"
        let stat = try #require(ProcStat(parsing: line))
        #expect(stat.name == "evil) S (x) 1")
        #expect(stat.state == "R")
        #expect(stat.parentProcessID == 17)
        #expect(stat.userTicks == 250 && stat.systemTicks == 50)
        #expect(stat.startTimeTicks == 987654)
        #expect(ProcStat(parsing: "4242 (short) S 1 2") == nil)
    }

    @Test func statOfThisThreadNamesItAndSaysItRuns() throws {
        let me = ProcDirectory.current.thread(sw_gettid())
        let stat = try #require(me.stat())
        #expect(stat.state == "R")
        #expect(stat.name == me.comm())
        #expect(stat.startTimeTicks > 0)
    }

    @Test func fieldsAreTrimmedAndLookedUpByKey() {
        let status = ProcFields(
            parsing: "Name:\tloop\nState:\tS (sleeping)\nTracerPid:\t0\nSigBlk:\t0000000000010000\n"
                + "voluntary_ctxt_switches:\t  12 \nnonvoluntary_ctxt_switches:\t3\nno colon here\n")
        #expect(status["State"] == "S (sleeping)")
        #expect(status.state == "S")
        #expect(status.tracerProcessID == 0)
        #expect(status.blockedSignals == 1 << 16)
        #expect(status.voluntarySwitches == 12 && status.involuntarySwitches == 3)
        #expect(status["Missing"] == nil)
        let io = ProcFields(parsing: "rchar: 10\nsyscr: 7\nsyscw: 2\n")
        #expect(io.readCalls == 7 && io.writeCalls == 2)
    }

    @Test func mapsLinesKeepPermissionsInodeAndPathWhateverTheyBack() {
        let text = """
            55d0c3a00000-55d0c3a21000 r-xp 00002000 fd:01 131090                     /usr/bin/service (deleted)
            7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]
            7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
            7f0000001000-7f0000002000 ---p 00000000 00:00 0
            7fff00000000-7fff00002000 r-xp 00000000 00:00 0                          [vdso]
            not a mapping
            """
        let maps = ProcMapping.all(in: text)
        #expect(maps.count == 5)
        #expect(maps[0].path == "/usr/bin/service" && maps[0].isExecutable && !maps[0].isWritable)
        #expect(maps[0].offset == 0x2000 && maps[0].inode == 131090)
        #expect(maps[1].path == "[stack]" && maps[1].isReadable && maps[1].isWritable)
        #expect(maps[2].path == nil && maps[3].path == nil && !maps[3].isReadable)
        #expect(maps[1].contains(0x7ffd1c020fff) && !maps[1].contains(0x7ffd1c021000))
        let images = ImageMap(mappings: maps).images.map(\.path)
        #expect(images == ["/usr/bin/service", "[vdso]"])
    }

    @Test func malformedMapsLinesAreSkippedAndNoFieldReadsPastItsLine() {
        let lines = [
            "0-1 r-xp 0 fd:01 7 /lib/a.so",  // well-formed: one-digit fields
            "00000000000000000-1 r-xp 0 fd:01 7 /x",  // 17 hex digits
            "10-20 r- 0 fd:01 7 /x",  // two permission letters
            "10-20 r-xp 0 fd:01",  // no inode
            "1020 r-xp 0 fd:01 7 /x",  // no dash
            "10-2g r-xp 0 fd:01 7 /x",  // not hex
            "10-20 r-xp 0 fd:01 7 (deleted)",  // a path that is only the suffix's text
            "10-20 r-xp 0 fd:01 7 /with spaces/lib.so (deleted)",
            "",
            "30-40 rwxp ffffffffffffffff fd:01 18446744073709551615",
        ]
        let maps = ProcMapping.all(in: lines.joined(separator: "\n"))
        #expect(maps.count == 4, "\(maps)")
        #expect(maps.first?.path == "/lib/a.so" && maps.first?.end == 1)
        #expect(maps.dropFirst().first?.path == "(deleted)")
        #expect(maps.dropFirst(2).first?.path == "/with spaces/lib.so")
        #expect(maps.last?.offset == UInt64.max && maps.last?.path == nil && maps.last?.isExecutable == true)
        // A line cut anywhere parses or is skipped; its fields never come from the next line.
        let line = "7f0000001000-7f0000002000 r-xp 00001000 fd:01 42 /lib/x.so"
        for cut in 0...line.utf8.count {
            let text = String(line.prefix(cut)) + "\n" + "1-2 ---p 0 0:0 0"
            let parsed = ProcMapping.all(in: text)
            #expect(parsed.last?.start == 1 && parsed.count <= 2, "cut at \(cut): \(parsed)")
            if parsed.count == 2 { #expect(parsed[0].path.map { "/lib/x.so".hasPrefix($0) } ?? true) }
        }
    }

    @Test func thisProcessHasItsStackAndCodeMapped() throws {
        let maps = try #require(ProcDirectory.current.maps())
        var local = 0
        let stack = withUnsafePointer(to: &local) { UInt64(UInt(bitPattern: $0)) }
        #expect(maps.contains { $0.contains(stack) && $0.isWritable })
        #expect(maps.contains { $0.isExecutable && $0.path?.hasPrefix("/") == true })
    }

    @Test func schedstatGivesCPURunQueueWaitAndTimeslices() throws {
        let schedule = try #require(ThreadSchedule(parsing: "123456789 2500 17\n", monotonicNanos: 99))
        var expected = ThreadSchedule(cpuNanos: 123_456_789, runQueueWaitNanos: 2500, monotonicNanos: 99)
        expected.timeslices = 17
        #expect(schedule == expected)
        #expect(ThreadSchedule(parsing: "123456789 2500", monotonicNanos: 0)?.timeslices == nil)
        #expect(ThreadSchedule(parsing: "garbage", monotonicNanos: 0) == nil)
    }
}
