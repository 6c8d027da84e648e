import CStallWatchSymbols
// Tests of the symbolication stage against this very process: libc, the test binary, unmapped memory.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// This function's own backtrace, and the line of the call that took it (for the file:line check).
@inline(never) func symbolicatorTestsCaptureHere() -> (addresses: [UInt64], line: Int) {
    (Thread.callStackReturnAddresses.map { UInt64($0.uintValue) }, #line)
}

@Suite(.offPool) struct SymbolicatorTests {
    /// `getpid`'s address in libc, and libc's load base as libdwfl (its own /proc/PID/maps reader and the ELF
    /// program headers) sees it: the bias of an ELF whose first segment has vaddr 0 is its load base.
    private func libcGetpid() throws -> (address: UInt64, base: UInt64) {
        let handle = try #require(dlopen(nil, RTLD_NOW))
        let address = UInt64(UInt(bitPattern: dlsym(handle, "getpid")))
        try #require(address != 0)
        let session = try #require(sw_symbols_create(getpid(), nil))
        defer { sw_symbols_destroy(session) }
        var info = sw_module_info()
        try #require(sw_symbols_module(session, address, &info) == 0)
        #expect(String(cString: info.path).hasSuffix("libc.so.6"))
        #expect(info.build_id_length >= 16)
        #expect(info.start == info.bias)
        return (address, info.bias)
    }

    @Test func namesALibcFunctionAndItsImage() throws {
        let (address, base) = try libcGetpid()
        let symbolicator = Symbolicator(processID: getpid(), mode: .full)
        let frame = try #require(symbolicator.symbolicate([address]).first)
        #expect(frame.address == address)
        #expect(frame.symbol?.contains("getpid") == true)
        #expect(frame.symbolOffset == 0)
        #expect(frame.image?.hasSuffix("libc.so.6") == true)
        #expect(frame.offset == (address - base))
        let image = try #require(symbolicator.images(for: [frame]).first)
        #expect(image.path == frame.image)
        #expect(image.base == base)
        let buildID = try #require(image.buildId)
        #expect(buildID.count >= 16 && buildID.allSatisfy(\.isHexDigit))
        #expect((image.size ?? 0) > address - base)
    }

    @Test func namesASwiftFunctionWithFileAndLineInFullMode() throws {
        let (addresses, captureLine) = symbolicatorTestsCaptureHere()
        let frames = Symbolicator(processID: getpid(), mode: .full).symbolicate(addresses)
        let frame = try #require(frames.first { $0.symbol?.contains("symbolicatorTestsCaptureHere") == true })
        #expect(frame.symbol?.hasPrefix("$s") == false, "demangled")
        #expect(frame.image?.isEmpty == false)
        #if DEBUG
            #expect(frame.file?.hasSuffix("SymbolicatorTests.swift") == true)
            let line = try #require(frame.line)
            #expect(abs(line - captureLine) <= 1, "line \(line)")
        #endif
    }

    @Test func fastModeHasNamesButNoFileOrLine() throws {
        let frames = Symbolicator(processID: getpid(), mode: .fast).symbolicate(
            symbolicatorTestsCaptureHere().addresses)
        let frame = try #require(frames.first { $0.symbol?.contains("symbolicatorTestsCaptureHere") == true })
        #expect(frame.file == nil && frame.line == nil)
        #expect(frames.allSatisfy { $0.file == nil && $0.line == nil })
    }

    @Test func offModeKeepsImageAndOffsetOnly() throws {
        let (address, base) = try libcGetpid()
        let symbolicator = Symbolicator(processID: getpid(), mode: .off)
        let frame = try #require(symbolicator.symbolicate([address]).first)
        #expect(frame.symbol == nil && frame.symbolOffset == nil && frame.file == nil && frame.line == nil)
        #expect(frame.image?.hasSuffix("libc.so.6") == true)
        #expect(frame.offset == (address - base))
        #expect(symbolicator.images(for: [frame]).first?.buildId != nil)
    }

    @Test func anUnmappedAddressYieldsOnlyTheAddress() {
        let frames = Symbolicator(processID: getpid(), mode: .full).symbolicate([0x10, 0x18])
        #expect(frames == [StackFrame(address: 0x10), StackFrame(address: 0x18)])
    }

    @Test func returnAddressesAreLookedUpOneByteEarlierButKeepTheirAddress() throws {
        let (address, _) = try libcGetpid()
        let symbolicator = Symbolicator(processID: getpid(), mode: .fast)
        // As a return address, getpid's first byte belongs to whatever precedes it, not to getpid at +0.
        let frames = symbolicator.symbolicate([address, address, address + 1])
        #expect(frames[1].address == address)
        #expect(frames[1].symbol == nil || frames[1].symbol?.contains("getpid") == false || frames[1].symbolOffset != 0)
        #expect(frames[2].symbol?.contains("getpid") == true && frames[2].symbolOffset == 1)
    }

    @Test func theExecutableHasABuildID() throws {
        let image = try #require(Symbolicator(processID: getpid(), mode: .off).executableImage())
        #expect(image.path.hasPrefix("/"))
        #expect(image.buildId != nil)
        #expect(image.buildId == BuildID.ofFile(atPath: image.path))
    }

    @Test func imageMapParsesLoadBaseAndSize() throws {
        let map = ImageMap(
            parsing: """
                55d0a0000000-55d0a0002000 r--p 00000000 fe:00 1 /usr/bin/demo
                55d0a0002000-55d0a0008000 r-xp 00002000 fe:00 1 /usr/bin/demo
                55d0a0009000-55d0a000a000 rw-p 00008000 fe:00 1 /usr/bin/demo
                55d0a000a000-55d0a000b000 rw-p 00000000 00:00 0 
                7f0000001000-7f0000003000 r-xp 00001000 fe:00 2 /lib/x86_64-linux-gnu/libz.so.1 (deleted)
                7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0 [vdso]
                garbage
                """)
        #expect(map.images.map(\.path) == ["/usr/bin/demo", "/lib/x86_64-linux-gnu/libz.so.1", "[vdso]"])
        #expect(map.image(containing: 0x55d0_a000_3000)?.size == 0xa000)
        #expect(map.image(containing: 0x55d0_a000_8800) == nil, "a gap between mappings")
        #expect(map.image(containing: 0x55d0_a000_a800) == nil, "anonymous memory")
        #expect(map.image(containing: 0x7f00_0000_1000)?.base == 0x7f00_0000_0000)
        #expect(map.image(containing: 0x7ffc_0000_0010)?.path == "[vdso]")
    }

    @Test func demanglesSwiftAndCxxAndLeavesCNamesAlone() {
        #expect(
            Demangler.demangle("$sSi1poiyS2i_SitFZ") == "static Swift.Int.+ infix(Swift.Int, Swift.Int) -> Swift.Int")
        #expect(Demangler.demangle("_ZNSt6vectorIiSaIiEE9push_backERKi").contains("push_back"))
        #expect(Demangler.demangle("getpid") == "getpid")
        #expect(Demangler.demangle("$sNotReallyMangled") == "$sNotReallyMangled")
    }

    /// Prints warm and cold costs for ~40 frames; run with STALLWATCH_MEASURE=1 (timings belong in bench runs).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["STALLWATCH_MEASURE"] == "1", "measurement only"))
    func measureSymbolicationCost() {
        var addresses = symbolicatorTestsCaptureHere().addresses
        while addresses.count < 40 { addresses += addresses }
        addresses = Array(addresses.prefix(40))
        func micros(_ body: () -> Void) -> Double {
            let start = DispatchTime.now().uptimeNanoseconds
            body()
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
        }
        for mode in SymbolicationMode.allCases {
            let symbolicator = Symbolicator(processID: getpid(), mode: mode)
            let cold = micros { _ = symbolicator.symbolicate(addresses) }
            var warm: [Double] = []
            for _ in 0..<1000 { warm.append(micros { _ = symbolicator.symbolicate(addresses) }) }
            warm.sort()
            let images = micros { _ = symbolicator.images(for: symbolicator.symbolicate(addresses)) }
            print(
                "\(mode): symbolicate 40 frames: cold \(Int(cold)) µs, warm median \(warm[500]) µs p99 \(warm[990]) µs; first images() \(Int(images)) µs"
            )
        }
    }
}
