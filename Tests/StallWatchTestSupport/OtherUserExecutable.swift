// Running a built program as another user, wherever the checkout lives.
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A built executable copied where another user can run it, with a directory for that user's files.
///
/// Tests that run something as another user (`runuser -u nobody`) need root, and the user must be able to reach
/// what it runs: a checkout under a home directory of mode 0700 (most clones; `mktemp -d` makes such a directory
/// too) hides `.build` from everyone else. So the executable is copied into a fresh directory under `/tmp` that
/// every user may enter, with the shared libraries it loads from any directory the user cannot read (a toolchain
/// under a home directory; the executable's run path includes its own directory); the copy is removed on deinit.
package final class OtherUserExecutable {
    package let user: String
    /// The copy of the executable.
    package let path: String
    /// The directory holding the copy, mode 0755.
    package let directory: String

    /// Copies the built product `name` for `user`, and checks that `user` can run it (`--help`).
    ///
    /// - Throws: A test failure saying what is missing: root (to run as another user), or what `user` cannot reach.
    package init(_ name: String, user: String = "nobody", sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(
            geteuid() == 0, "needs root: runs \(name) as the user \(user) with runuser", sourceLocation: sourceLocation)
        self.user = user
        var template = Array("/tmp/stallwatch-\(user)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        directory = try #require(made.map { String(cString: $0) }, "mkdtemp in /tmp: errno \(errno)")
        chmod(directory, 0o755)
        path = directory + "/" + name
        let built = SidecarFixtures.executable(name)
        try FileManager.default.copyItem(atPath: built, toPath: path)
        chmod(path, 0o755)
        for library in try Self.libraries(of: built) where !Self.readable(library, by: user) {
            let copy = directory + "/" + (library as NSString).lastPathComponent
            try FileManager.default.copyItem(atPath: library, toPath: copy)
            chmod(copy, 0o755)
        }
        let probe = try Spawned("/usr/sbin/runuser", ["-u", user, "--", path, "--help"])
        try #require(
            probe.wait() == 0, "the user \(user) cannot run \(path): \(probe.stderr)", sourceLocation: sourceLocation)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The shared libraries `executable` loads, by `ldd`.
    package static func libraries(of executable: String) throws -> [String] {
        let ldd = try Spawned("/usr/bin/ldd", [executable])
        try #require(ldd.wait() == 0, "ldd \(executable): \(ldd.stderr)")
        return ldd.stdout.split(separator: "\n").compactMap { line in
            guard let arrow = line.range(of: "=> /") else { return nil }
            let rest = line[line.index(before: arrow.upperBound)...]
            return rest.split(separator: " ").first.map(String.init)
        }
    }

    /// Whether `user` can read `file` (every directory above it searchable, the file readable).
    package static func readable(_ file: String, by user: String) -> Bool {
        guard let probe = try? Spawned("/usr/sbin/runuser", ["-u", user, "--", "/usr/bin/test", "-r", file]) else {
            return false
        }
        return probe.wait() == 0
    }
}
