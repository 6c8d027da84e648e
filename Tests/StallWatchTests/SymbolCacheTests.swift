// Tests of the shared symbol cache: reuse across stalls and processes, and no stale names for a rebuilt binary.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@inline(never) func symbolCacheTestsCaptureHere() -> [UInt64] {
    Thread.callStackReturnAddresses.map { UInt64($0.uintValue) }
}

/// A small C program built for the test: prints the address of its one named function, then waits to be killed.
struct NamedFunctionProgram {
    let path: String

    /// Builds the program at `path` with its function called `name` (written beside it and renamed over `path`,
    /// so a rebuild is a new file, as an install is). The name is also in the code's data: GNU ld's build-id
    /// hashes the loaded sections, not the symbol table, so a build that changed only a name would keep its id.
    static func build(named name: String, at path: String) throws -> NamedFunctionProgram {
        let source = path + ".c"
        let program = """
            #include <stdio.h>
            #include <unistd.h>
            __attribute__((noinline)) void \(name)(void) { puts("\(name)"); }
            int main(void) {
                printf("%lx\\n", (unsigned long)(void *)&\(name));
                fflush(stdout);
                for (;;) pause();
            }
            """
        try program.write(toFile: source, atomically: true, encoding: .utf8)
        let output = try Fixtures.run("/usr/bin/cc", ["-O1", "-Wl,--build-id", "-o", path + ".new", source])
        try #require(output.status == 0, "cc: \(output.stderr)")
        try #require(rename(path + ".new", path) == 0)
        return NamedFunctionProgram(path: path)
    }
}

/// A running instance of a ``NamedFunctionProgram``, killed when released.
final class RunningProgram {
    let process = Process()
    /// Where the named function lies in this process.
    let functionAddress: UInt64
    var processID: Int32 { process.processIdentifier }

    init(_ program: NamedFunctionProgram) throws {
        process.executableURL = URL(fileURLWithPath: program.path)
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The first line arrives once the program runs (so its images are mapped); EOF if it died.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        functionAddress = UInt64(text, radix: 16) ?? 0
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

@Suite(.offPool) struct SymbolCacheTests {
    static let compilerPresent = FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")
    static let compilerMissing: Comment = "/usr/bin/cc is missing (the Debian package gcc, scripts/bootstrap.sh)"

    @Test func aSecondStallsSymbolicatorIsServedFromTheImageTablesTheFirstOpened() throws {
        let cache = SymbolCache()
        let addresses = symbolCacheTestsCaptureHere()
        let first = Symbolicator(processID: getpid(), mode: .full, cache: cache).symbolicate(addresses)
        let afterFirst = cache.statistics
        #expect(afterFirst.imagesOpened >= 1)
        #expect(afterFirst.misses >= 1)
        let second = Symbolicator(processID: getpid(), mode: .full, cache: cache).symbolicate(addresses)
        let afterSecond = cache.statistics
        #expect(second == first)
        #expect(first.contains { $0.symbol?.contains("symbolCacheTestsCaptureHere") == true })
        #expect(afterSecond.imagesOpened == afterFirst.imagesOpened, "no image opened twice")
        #expect(afterSecond.misses == afterFirst.misses, "every name and line answered from the tables")
        #expect(afterSecond.hits >= afterFirst.hits + first.filter { $0.symbol != nil }.count)
        #expect(afterSecond.imagesReused >= afterFirst.imagesReused + 1)
    }

    @Test func aSymbolicatorThatMustNotWaitGivesNoNameUntilAnotherLoadedTheTable() throws {
        let cache = SymbolCache()
        let addresses = symbolCacheTestsCaptureHere()
        let watching = Symbolicator(processID: getpid(), mode: .fast, cache: cache)
        watching.waitsForNames = false
        let before = watching.symbolicate(addresses)
        #expect(!before.contains { $0.symbol?.contains("symbolCacheTestsCaptureHere") == true })
        #expect(before.map(\.address) == addresses, "every frame kept, with its image and offset")
        #expect(watching.pendingNameLookups >= 1)
        #expect(cache.statistics.imagesOpened == 0, "no table loaded by the symbolicator that must not wait")
        // The report queue's symbolicator loads the tables; the watching one then answers from them.
        _ = Symbolicator(processID: getpid(), mode: .fast, cache: cache).symbolicate(addresses)
        let after = watching.symbolicate(addresses)
        #expect(after.contains { $0.symbol?.contains("symbolCacheTestsCaptureHere") == true })
    }

    @Test func twoProcessesOfOneBinaryShareItsEntry() throws {
        try #require(Self.compilerPresent, Self.compilerMissing)
        let directory = Fixtures.temporaryDirectory("symbol-cache-share")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let program = try NamedFunctionProgram.build(named: "stallwatch_fixture_alpha", at: directory + "/named")
        let one = try RunningProgram(program)
        let two = try RunningProgram(program)
        let cache = SymbolCache()
        let inOne = Symbolicator(processID: one.processID, mode: .full, cache: cache)
            .symbolicate([one.functionAddress])
        #expect(inOne.first?.symbol == "stallwatch_fixture_alpha")
        let afterOne = cache.statistics
        let inTwo = Symbolicator(processID: two.processID, mode: .full, cache: cache)
            .symbolicate([two.functionAddress])
        let afterTwo = cache.statistics
        #expect(inTwo.first?.symbol == "stallwatch_fixture_alpha")
        #expect(inTwo.first?.offset == inOne.first?.offset)
        #expect(afterTwo.imagesOpened == afterOne.imagesOpened, "the second process opened nothing")
        #expect(afterTwo.imagesReused >= afterOne.imagesReused + 1)
        #expect(afterTwo.misses == afterOne.misses)
        #expect(afterTwo.hits >= afterOne.hits + 1)
    }

    @Test func aRebuiltBinaryIsNotServedTheOldBuildsNames() throws {
        try #require(Self.compilerPresent, Self.compilerMissing)
        let directory = Fixtures.temporaryDirectory("symbol-cache-rebuild")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/named"
        let old = try RunningProgram(try NamedFunctionProgram.build(named: "stallwatch_fixture_alpha", at: path))
        let cache = SymbolCache()
        let oldFrames = Symbolicator(processID: old.processID, mode: .full, cache: cache)
            .symbolicate([old.functionAddress])
        #expect(oldFrames.first?.symbol == "stallwatch_fixture_alpha")
        let oldImages = cache.statistics.imagesOpened

        // Installed over the same path while the old instance still runs.
        let new = try RunningProgram(try NamedFunctionProgram.build(named: "stallwatch_fixture_gamma", at: path))
        let symbolicator = Symbolicator(processID: new.processID, mode: .full, cache: cache)
        let newFrames = symbolicator.symbolicate([new.functionAddress])
        #expect(newFrames.first?.symbol == "stallwatch_fixture_gamma")
        #expect(newFrames.first?.image == path)
        #expect(cache.statistics.imagesOpened == oldImages + 1, "the new build has an entry of its own")
        let newID = try #require(symbolicator.executableImage()?.buildId)
        let oldID = try #require(Symbolicator(processID: old.processID, mode: .off).executableImage()?.buildId)
        #expect(newID != oldID)

        // The old instance maps the replaced file: it keeps getting its own binary's names.
        let again = Symbolicator(processID: old.processID, mode: .full, cache: cache)
            .symbolicate([old.functionAddress])
        #expect(again.first?.symbol == "stallwatch_fixture_alpha")
    }

    @Test func theCacheKeepsAtMostItsCapacityOfImages() throws {
        let cache = SymbolCache(capacity: 2)
        let handle = try #require(dlopen(nil, RTLD_NOW))
        var addresses = symbolCacheTestsCaptureHere()
        for name in ["getpid", "swift_retain", "dispatch_async"] {
            if let symbol = dlsym(handle, name) { addresses.append(UInt64(UInt(bitPattern: symbol))) }
        }
        _ = Symbolicator(processID: getpid(), mode: .fast, cache: cache).symbolicate(addresses)
        let statistics = cache.statistics
        #expect(statistics.imagesOpened >= 3)
        #expect(statistics.resident <= 2)
        #expect(statistics.evictions >= statistics.imagesOpened - 2)
    }
}
