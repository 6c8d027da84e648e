// The rooms of the StallWatch library depend on each other one way only: the folder graph has no two-way tie.
import Foundation
import StallWatchTestSupport
import Testing

@Suite(.offPool) struct FolderDependencyTests {
    /// `Sources/StallWatch`, found from this file's path.
    static let library = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/StallWatch").standardizedFileURL

    @Test func noTwoFoldersOfTheLibraryDependOnEachOther() throws {
        let graph = try SourceFolderGraph(root: Self.library)
        #expect(graph.folders.count > 5, "read \(graph.folders.count) folders under \(Self.library.path)")
        for (a, b) in graph.twoWayTies {
            Issue.record(
                """
                \(a) and \(b) depend on each other; move the declarations one side needs so that only one uses the \
                other.
                \(a) uses \(graph.uses(a, of: b))
                \(b) uses \(graph.uses(b, of: a))
                """)
        }
    }

    @Test func theLibrarysFoldersFormLayers() throws {
        let graph = try SourceFolderGraph(root: Self.library)
        for cycle in graph.cycles {
            let edges: [String] = cycle.flatMap { from in
                cycle.filter { graph.edges[from]?[$0] != nil }.map {
                    "\(from) uses \(graph.uses(from, of: $0, limit: 3))"
                }
            }
            let message =
                "these folders reach each other through their dependencies: \(cycle.joined(separator: ", "))\n"
                + edges.joined(separator: "\n") + "\n\nThe whole graph:\n\(graph.description)"
            Issue.record(Comment(rawValue: message))
        }
    }

    /// The reader sees through comments and string literals, reads interpolations, and counts a room's extension
    /// of another room's type as a use of that room.
    @Test func readsNamesOnlyFromCode() {
        let source = #"""
            // Widget in a comment
            let a = "Gadget \(Sprocket.count) /* not a comment"
            /* nested /* Widget */ still comment */
            let b = #"raw "Widget" \(Gadget)"#
            """#
        let code = String(decoding: SourceFolderGraph.code(of: Array(source.utf8)), as: UTF8.self)
        #expect(!code.contains("Widget"))
        #expect(code.contains("Sprocket.count"))
        #expect(!code.contains("Gadget \\("))
        var declared: [String] = []
        SourceFolderGraph.declarations(
            in: Array(
                """
                public final class Outer {
                    func inside() {}
                }
                extension Outer {
                    package func added() {}
                }
                extension Int {
                    static func twice() {}
                    init?(text value: String) { nil }
                }
                private struct Hidden {}
                """.utf8)
        ) { kind, name in
            if case .any = kind { return }
            declared.append("\(kind):\(name)")
        }
        #expect(declared == ["topLevel:Outer", "extensionMember:added", "extensionMember:twice", "extensionInit:text"])
    }
}
