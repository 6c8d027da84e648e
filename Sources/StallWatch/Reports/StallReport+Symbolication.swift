// StallReport+Symbolication: whether a report's source lines are all in, and carrying filled frames to every view.
import Foundation

extension StallReport {
    /// How complete the report's symbolication is, so readers know whether frames without file:line lack it
    /// for good or only for now.
    package struct SymbolicationState: Codable, Sendable, Equatable {
        /// Whether frames carry every file:line the images' DWARF gives.
        package enum Lines: String, Codable, Sendable, CaseIterable {
            /// Not looked up yet for some frames: a provisional report (names only), or a final report written
            /// before its images' line tables had loaded; the final report's rewrite fills them in.
            case pending
            /// Looked up for every frame; a frame without file:line has no line information.
            case complete
        }

        var lines: Lines

        package init(lines: Lines) {
            self.lines = lines
        }
    }

    /// Whether some frames still wait for their file:line (``SymbolicationState/Lines/pending``).
    package var linesPending: Bool { symbolication?.lines == .pending }

    /// Replaces every frame of the point stack, the call tree and the thread snapshot that is a key of
    /// `replacements` by its value, so that frames filled in the samples reach every view (list, summary and
    /// HTML read the point stack and the call tree, `show --all-threads` the snapshot), not only the samples.
    package mutating func replaceFrames(_ replacements: [StackFrame: StackFrame]) {
        guard !replacements.isEmpty else { return }
        func replaced(_ frames: [StackFrame]) -> [StackFrame] { frames.map { replacements[$0] ?? $0 } }
        func replaced(_ node: CallTree.Node) -> CallTree.Node {
            var node = node
            node.frame = replacements[node.frame] ?? node.frame
            node.children = node.children.map(replaced)
            return node
        }
        if var point = pointStack {
            point.frames = replaced(point.frames)
            pointStack = point
        }
        callTree = callTree?.map(replaced)
        if let snapshot = threads {
            threads = snapshot.map { thread in
                var thread = thread
                thread.frames = replaced(thread.frames)
                return thread
            }
        }
    }
}
