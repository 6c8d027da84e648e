// StallReport+ReplaceFrames: carrying frames filled in the samples over to the report's other stacks.
import StallWatch

extension StallReport {
    /// Replaces every frame of the point stack, the call tree and the thread snapshot that is a key of
    /// `replacements` by its value, so that offline symbolication reaches every view (list, summary and HTML
    /// read the point stack and the call tree, `show --all-threads` the snapshot), not only the samples.
    mutating func replaceFrames(_ replacements: [StackFrame: StackFrame]) {
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
