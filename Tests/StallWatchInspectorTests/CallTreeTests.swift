import StallWatchTestSupport
// Tests of CallTree: samples merged by function, callers first, counts and self counts, machinery trimmed.
import Testing

@testable import StallWatch
@testable import StallWatchInspector

@Suite(.offPool) struct CallTreeTests {
    static func frame(_ symbol: String?, offset: UInt64 = 0x10, line: Int? = nil) -> StackFrame {
        StackFrame(address: 0x100 + offset, image: "/bin/app", offset: offset, symbol: symbol, line: line)
    }

    @Test func samplesAreMergedByFunctionWithCountsAndSelfCounts() {
        let main = Self.frame("main")
        let samples: [StallReport.Sample] = [
            .init(offsetMs: 0, frames: [Self.frame("sort", offset: 0x20, line: 1), Self.frame("work"), main]),
            .init(offsetMs: 1, frames: [Self.frame("sort", offset: 0x24, line: 2), Self.frame("work"), main]),
            .init(offsetMs: 2, frames: [Self.frame("work"), main]),
            .init(offsetMs: 3, frames: [Self.frame("log"), main]),
            .init(offsetMs: 4, frames: [], error: "no stack"),
        ]
        let tree = CallTree(samples: samples)
        #expect(tree.total == 5)
        #expect(tree.withoutStack == 1)
        #expect(tree.roots.map(\.frame.symbol) == ["main"])
        let root = tree.roots[0]
        #expect(root.count == 4)
        #expect(root.children.map(\.frame.symbol) == ["work", "log"], "busiest first")
        let work = root.children[0]
        #expect(work.count == 3)
        #expect(work.selfCount == 1)
        #expect(work.children.count == 1, "two addresses in sort are one node")
        #expect(work.children[0].count == 2)
        #expect(work.children[0].frame.line == 1, "the first frame seen represents the node")
    }

    @Test func machineryIsTrimmedFromTheInnerEnd() {
        let samples: [StallReport.Sample] = [
            .init(
                offsetMs: 0, frames: [Self.frame("sw_capture_handler"), Self.frame("__restore_rt"), Self.frame("main")])
        ]
        let tree = CallTree(samples: samples) { $0.symbol.map(ApplicationFrame.isMachinery) ?? false }
        #expect(tree.roots.count == 1)
        #expect(tree.roots[0].frame.symbol == "main")
        #expect(tree.roots[0].children.isEmpty)
        #expect(tree.roots[0].selfCount == 1)
    }

    @Test func unsymbolicatedFramesMergeByImageAndOffset() {
        let samples: [StallReport.Sample] = [
            .init(offsetMs: 0, frames: [StackFrame(address: 0x7f00, image: "/lib/a.so", offset: 0x100)]),
            .init(offsetMs: 1, frames: [StackFrame(address: 0x9f00, image: "/lib/a.so", offset: 0x100)]),
        ]
        let tree = CallTree(samples: samples)
        #expect(tree.roots.count == 1, "same image + offset in two processes")
        #expect(tree.roots[0].count == 2)
    }

    @Test func theTextViewLimitsDepth() {
        let frames = (0..<10).map { Self.frame("f\($0)") }
        let tree = CallTree(samples: [.init(offsetMs: 0, frames: frames)])
        let lines = CallTreeView(maximumDepth: 3).lines(tree)
        #expect(lines.count == 4)
        #expect(lines.last?.hasSuffix("… deeper frames not shown (depth limit 3)") == true)
    }
}
