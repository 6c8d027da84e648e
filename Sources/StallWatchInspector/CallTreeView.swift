// CallTreeView: renders a CallTree as indented text with sample counts and shares, for `reports show`.
import Foundation
import StallWatch

/// The text of a call tree: one line per node, `count  share  ├─ function (image) file:line`, callers above
/// callees, the busiest branch first.
struct CallTreeView: Sendable {
    /// Frames deeper than this are summarised in one line (deep recursion would otherwise run off the screen).
    var maximumDepth: Int
    /// Branches with a smaller share of all samples are summarised in one line per parent.
    var minimumShare: Double

    init(maximumDepth: Int = 48, minimumShare: Double = 0) {
        self.maximumDepth = maximumDepth
        self.minimumShare = minimumShare
    }

    func lines(_ tree: CallTree) -> [String] {
        guard tree.total > 0 else { return [] }
        let width = String(tree.total).count
        var out: [String] = []
        func share(_ count: Int) -> String {
            let text = String(format: "%.1f%%", Double(count) * 100 / Double(tree.total))
            return String(repeating: " ", count: max(0, 6 - text.count)) + text
        }
        func row(_ count: Int, _ prefix: String, _ text: String) -> String {
            String(repeating: " ", count: max(0, width - String(count).count)) + "\(count)  \(share(count))  "
                + prefix + text
        }
        func visit(_ nodes: [CallTree.Node], prefix: String, depth: Int) {
            let shown = nodes.filter { Double($0.count) / Double(tree.total) >= minimumShare }
            let hidden = nodes.count - shown.count
            for (index, node) in shown.enumerated() {
                let last = index == shown.count - 1 && hidden == 0
                let guide = depth == 0 ? "" : (last ? "└─ " : "├─ ")
                var text = Self.label(node.frame)
                if !node.children.isEmpty, node.selfCount > 0 { text += "  [self \(node.selfCount)]" }
                out.append(row(node.count, prefix + guide, text))
                let inner = depth == 0 ? "" : prefix + (last ? "   " : "│  ")
                if depth + 1 >= maximumDepth, !node.children.isEmpty {
                    let deeper = node.count - node.selfCount
                    out.append(row(deeper, inner + "└─ ", "… deeper frames not shown (depth limit \(maximumDepth))"))
                } else {
                    visit(node.children, prefix: inner, depth: depth + 1)
                }
            }
            if hidden > 0 {
                let count = nodes.filter { Double($0.count) / Double(tree.total) < minimumShare }.map(\.count)
                    .reduce(0, +)
                out.append(row(count, prefix + (depth == 0 ? "" : "└─ "), "… \(hidden) smaller branches"))
            }
        }
        visit(tree.roots, prefix: "", depth: 0)
        if tree.withoutStack > 0 { out.append(row(tree.withoutStack, "", "[no stack]")) }
        return out
    }

    /// `function (image) file:line` for a symbolicated frame, `image + offset` without a symbol, else the
    /// address: what a call-tree node, a flame-graph box or an exported frame is called.
    static func label(_ frame: StackFrame, withLocation: Bool = true) -> String {
        var text: String
        if let symbol = frame.readableName {
            text = symbol
            if let image = frame.image { text += " (\(ApplicationFrame.imageName(image)))" }
        } else if let image = frame.image {
            text = ApplicationFrame.imageName(image) + (frame.offset.map { " + " + $0.hexAddress } ?? "")
        } else {
            text = frame.address.hexAddress
        }
        if withLocation, let location = location(frame) { text += " " + location }
        return text
    }

    /// `file:line` (the file's last two path components), or nil without a file.
    static func location(_ frame: StackFrame) -> String? {
        guard let file = frame.file else { return nil }
        let parts = file.split(separator: "/")
        let short = parts.count > 2 ? parts.suffix(2).joined(separator: "/") : file
        return short + (frame.line.map { ":\($0)" } ?? "")
    }

    /// The name of a frame in exports (folded, speedscope, pprof, flame graph): the function, or image +
    /// offset, or the address.
    static func functionName(_ frame: StackFrame) -> String {
        frame.readableName ?? frame.image.map {
            ApplicationFrame.imageName($0) + (frame.offset.map { " + " + $0.hexAddress } ?? "")
        }
            ?? frame.address.hexAddress
    }
}
