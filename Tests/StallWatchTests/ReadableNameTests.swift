// Readable names: the Swift backtracer's short style beside the full demangled name, from a real symbolication.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

/// A function of this test binary whose frame the short-name tests symbolicate.
@inline(never) func readableNameTestsCaptureHere(_ label: String) -> [UInt64] {
    precondition(!label.isEmpty)
    return Thread.callStackReturnAddresses.map { UInt64($0.uintValue) }
}

@Suite(.offPool) struct ReadableNameTests {
    @Test func aSpecializedFunctionReadsAsTheBacktracerPrintsIt() {
        let mangled = "$s15stallwatch_demo6StallsO10stallOnCPU10durationMsySi_tFZTf4d_n"
        #expect(
            Demangler.demangle(mangled)
                == "function signature specialization <Arg[0] = Dead> of static "
                + "stallwatch_demo.Stalls.stallOnCPU(durationMs: Swift.Int) -> ()")
        #expect(Demangler.shortName(mangled) == "specialized static Stalls.stallOnCPU(durationMs:)")
    }

    @Test func genericsAndCxxNamesAreShortenedAndCNamesHaveNoShortForm() {
        #expect(
            Demangler.shortName("$ss6_merge3low3mid4high6buffer2bySbSpyxG_A3GSbx_xtKXEtKlF")
                == "_merge<A>(low:mid:high:buffer:by:)")
        // C++: the backtracer's demangler when it takes the name, else the full name stands (no short form).
        #expect(Demangler.shortName("_ZNSt6vectorIiSaIiEE9push_backERKi").map { $0.contains("push_back") } != false)
        #expect(Demangler.shortName("getpid") == nil)
        #expect(StackFrame.shortSymbol(raw: "getpid", full: "getpid") == nil)
    }

    @Test func aSymbolicatedSwiftFrameCarriesBothNames() throws {
        let addresses = readableNameTestsCaptureHere("here")
        let frames = Symbolicator(processID: getpid(), mode: .fast).symbolicate(addresses)
        let frame = try #require(frames.first { $0.symbol?.contains("readableNameTestsCaptureHere") == true })
        #expect(frame.symbol?.contains("StallWatchTests.readableNameTestsCaptureHere(Swift.String)") == true)
        #expect(frame.shortSymbol == "readableNameTestsCaptureHere(_:)")
        #expect(frame.readableName == "readableNameTestsCaptureHere(_:)")
        let libc = frames.first { $0.image?.hasSuffix("libc.so.6") == true && $0.symbol != nil }
        if let libc { #expect(libc.shortSymbol == nil && libc.readableName == libc.symbol) }
    }

    @Test func jsonKeepsTheFullNameAndGainsTheShortOneBesideIt() throws {
        let frame = StackFrame(
            address: 0x1000, image: "/srv/app", offset: 0x10, symbol: "static App.Stalls.spin(count: Swift.Int) -> ()",
            symbolOffset: 4, shortSymbol: "static Stalls.spin(count:)")
        let data = try JSONEncoder().encode(frame)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["symbol"] as? String == "static App.Stalls.spin(count: Swift.Int) -> ()")
        #expect(object["shortSymbol"] as? String == "static Stalls.spin(count:)")
        #expect(try JSONDecoder().decode(StackFrame.self, from: data) == frame)
        var old = frame
        old.shortSymbol = nil
        let decoded = try JSONDecoder().decode(StackFrame.self, from: try JSONEncoder().encode(old))
        #expect(decoded.shortSymbol == nil && decoded.readableName == old.symbol, "reports without it still read")
    }

    @Test func theTopFrameIsNamedShort() throws {
        let frames = [
            StackFrame(
                address: 0x7f00_0000_1000, image: "/usr/lib/x86_64-linux-gnu/libc.so.6", offset: 0x1000,
                symbol: "__lll_lock_wait", symbolOffset: 1),
            StackFrame(
                address: 0x5500_0000_2000, image: "/srv/app", offset: 0x2000,
                symbol: "function signature specialization <Arg[1] = Dead> of static App.Store.save(id: Swift.Int)",
                symbolOffset: 40, shortSymbol: "specialized static Store.save(id:)"),
        ]
        let top = try #require(ApplicationFrame(frames: frames))
        #expect(top.function == "specialized static Store.save(id:)")
        #expect(top.description == "specialized static Store.save(id:) + 40")
    }
}
