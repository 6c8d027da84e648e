// The `stallwatch reports export` subcommand, and the report input and file output that export and html share.
import Foundation
import StallWatch
import StallWatchInspector

#if canImport(Glibc)
    import Glibc
#endif

extension ReportsCommands {
    /// `reports export FILE|DIR|ID… --format folded|speedscope|pprof [-o PATH] [filters]`: every sample of the
    /// named reports in one profile, written to PATH (or standard output).
    package static func export(_ invocation: Invocation) throws -> ExitCode {
        guard let text = invocation.arguments.options["--format"] else {
            throw CommandError.usage(
                "reports export: --format is required (\(ProfileFormat.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        let format = try option(invocation.arguments, "--format", default: ProfileFormat(rawValue: text) ?? .folded)
        let destination = outputPath(invocation)
        if format == .pprof, destination == nil, invocation.console.outputIsTerminal {
            throw CommandError.usage("reports export: pprof is binary; give -o PATH or redirect standard output")
        }
        var exporter = format.makeExporter()
        let count = try forEachNamedReport(invocation) { exporter.add($0.report) }
        guard count > 0 else { return .notFound }
        try write(try exporter.data(), to: destination, invocation)
        if let destination {
            invocation.console.printError(
                "stallwatch: wrote \(format.rawValue) profile of \(count) report\(count == 1 ? "" : "s") to \(destination)"
            )
        }
        return .ok
    }

    /// `-o PATH` / `--output PATH`; nil (or `-`) for standard output.
    static func outputPath(_ invocation: Invocation) -> String? {
        let path = invocation.arguments.options["-o"] ?? invocation.arguments.options["--output"]
        return path == "-" ? nil : path
    }

    /// Reads every report named by the positionals: directories and files are scanned (with the filter options,
    /// one warning per skipped file), anything else is a report id or prefix (``entry(_:_:)``).
    /// - Returns: how many reports `body` saw; when none, the reason has been printed on standard error.
    static func forEachNamedReport(_ invocation: Invocation, _ body: (ReportStore.Entry) throws -> Void) throws -> Int {
        let console = invocation.console
        let scanner = try scanner(invocation)
        var count = 0
        var outcome = ReportScanner.Outcome()
        for path in scanner.paths {
            if FileManager.default.fileExists(atPath: path) || path.contains("/") {
                var single = scanner
                single.paths = [path]
                var failure: (any Error)?
                let seen = try single.scan(warn: { console.printError("stallwatch: \($0)") }) { entry in
                    guard failure == nil else { return }
                    do { try body(entry) } catch { failure = error }
                    count += 1
                }
                if let failure { throw failure }
                outcome.read += seen.read
                outcome.skipped += seen.skipped
                outcome.missing += seen.missing
            } else {
                try body(try entry(path, invocation))
                outcome.read += 1
                count += 1
            }
        }
        if count == 0 { console.printError("stallwatch: \(nothingFound(scanner, outcome))") }
        return count
    }

    /// Writes `data` atomically to `path` (replacing it), or to standard output when `path` is nil. A path that
    /// names something other than a regular file (`/dev/null`, `/dev/stdout`, a FIFO) is written in place: renaming
    /// a temporary file over it would replace the device or pipe with a file.
    static func write(_ data: Data, to path: String?, _ invocation: Invocation) throws {
        guard let path else {
            invocation.console.dataOutput(data)
            return
        }
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG, status.st_mode & S_IFMT != S_IFDIR {
            return try writeInPlace(data, to: path)
        }
        do {
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandError(.failure, "cannot write \(path): \((error as NSError).localizedDescription)")
        }
    }

    /// Writes `data` through `path` as it is (a device or a pipe), never creating or replacing it.
    private static func writeInPlace(_ data: Data, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            throw CommandError(.failure, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    throw CommandError(.failure, "cannot write \(path): \(String(cString: strerror(errno)))")
                }
                offset += written
            }
        }
    }
}
