// CallTree: samples aggregated into a tree of call paths, root (outermost caller) first, with counts.

/// Backtraces merged into a tree: each node is one function reached through one call path, with how many
/// samples passed through it (`count`) and how many stopped in it (`selfCount`).
///
/// Frames are merged by function, not by address: two samples in `sortAndFilter()` at different lines are one
/// node, and the same function in two processes (different load addresses) is one node too. The node keeps the
/// first frame seen as its representative (for `file:line` and image). A pure value: no I/O, no clock, so the
/// watchdog can build one for a report and the inspector can build one for a directory of reports.
package struct CallTree: Sendable, Equatable, Codable {
    /// One function on one call path.
    package struct Node: Sendable, Equatable, Codable {
        /// The first frame seen at this node (its `file`/`line` are those of that first sample).
        package var frame: StackFrame
        /// Samples whose stack passes through this node (inclusive).
        package var count: Int
        /// Samples whose innermost (kept) frame is this node.
        package var selfCount: Int
        /// Callees, most samples first (first seen first on a tie).
        package var children: [Node]

        package init(frame: StackFrame, count: Int = 0, selfCount: Int = 0, children: [Node] = []) {
            self.frame = frame
            self.count = count
            self.selfCount = selfCount
            self.children = children
        }
    }

    /// The outermost frames of the samples, most samples first.
    package var roots: [Node]
    /// Every sample counted, including those without a stack.
    package var total: Int
    /// Samples that had no frames (the thread could not be stopped or unwound); they are in `total` only.
    package var withoutStack: Int

    package init(roots: [Node] = [], total: Int = 0, withoutStack: Int = 0) {
        self.roots = roots
        self.total = total
        self.withoutStack = withoutStack
    }

    /// Builds the tree of `samples` (frames innermost first, as reports store them).
    /// - Parameters:
    ///   - samples: the backtraces, each counted once.
    ///   - isMachinery: innermost frames for which this returns true are dropped (signal trampolines, the
    ///     capture handler) so that the leaves are the code that was running.
    package init(samples: [StallReport.Sample], isMachinery: (StackFrame) -> Bool = { _ in false }) {
        var builder = Builder()
        for sample in samples { builder.add(innermostFirst: sample.frames, weight: 1, isMachinery: isMachinery) }
        self = builder.tree()
    }

    /// The key two frames share when they are "the same function": image + symbol when symbolicated, else
    /// image + offset, else the raw address.
    package static func functionKey(_ frame: StackFrame) -> String {
        let image = frame.image ?? ""
        if let symbol = frame.symbol { return image + "\u{1}" + symbol }
        if let offset = frame.offset { return image + "\u{2}" + offset.hexAddress }
        return "\u{3}" + frame.address.hexAddress
    }

    /// Visits every node depth-first, parents before children, with its depth (roots are 0).
    package func forEach(_ body: (_ node: Node, _ depth: Int) -> Void) {
        func visit(_ node: Node, _ depth: Int) {
            body(node, depth)
            for child in node.children { visit(child, depth + 1) }
        }
        for root in roots { visit(root, 0) }
    }

    /// Accumulates weighted stacks, then produces a sorted ``CallTree``.
    package struct Builder {
        private final class MutableNode {
            let frame: StackFrame
            var count = 0
            var selfCount = 0
            var order: [String] = []
            var children: [String: MutableNode] = [:]
            init(frame: StackFrame) { self.frame = frame }

            func child(for frame: StackFrame) -> MutableNode {
                let key = CallTree.functionKey(frame)
                if let existing = children[key] { return existing }
                let node = MutableNode(frame: frame)
                children[key] = node
                order.append(key)
                return node
            }

            func frozen() -> Node {
                let kids = order.enumerated().map { ($0.offset, children[$0.element]!.frozen()) }
                    .sorted { ($0.1.count, -$0.0) > ($1.1.count, -$1.0) }.map(\.1)
                return Node(frame: frame, count: count, selfCount: selfCount, children: kids)
            }
        }

        private var root = MutableNode(frame: StackFrame(address: 0))
        private var total = 0
        private var withoutStack = 0

        package init() {}

        /// Adds one stack (innermost frame first) with a weight (usually 1 sample).
        package mutating func add(
            innermostFirst frames: [StackFrame], weight: Int = 1, isMachinery: (StackFrame) -> Bool = { _ in false }
        ) {
            if !isKnownUniquelyReferenced(&root) { root = copy(root) }
            total += weight
            var end = 0
            while end < frames.count, isMachinery(frames[end]) { end += 1 }
            guard end < frames.count else {
                withoutStack += weight
                return
            }
            var node = root
            for frame in frames[end...].reversed() {
                node = node.child(for: frame)
                node.count += weight
            }
            node.selfCount += weight
        }

        /// The tree so far.
        package func tree() -> CallTree {
            CallTree(roots: root.frozen().children, total: total, withoutStack: withoutStack)
        }

        private func copy(_ node: MutableNode) -> MutableNode {
            let fresh = MutableNode(frame: node.frame)
            fresh.count = node.count
            fresh.selfCount = node.selfCount
            fresh.order = node.order
            for (key, child) in node.children { fresh.children[key] = copy(child) }
            return fresh
        }
    }
}
