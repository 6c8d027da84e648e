// Addresses are integers in the report model and `0x…` strings in its JSON, in both directions.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ReportAddressCodingTests {
    @Test func hexAddressesRoundTrip() {
        #expect(UInt64(hexAddress: UInt64(0x7f00_dead_beef).hexAddress) == 0x7f00_dead_beef)
        #expect(UInt64(hexAddress: "zz") == nil)
    }

    @Test func framesImagesAndWaitAddressesAreHexStringsInJSON() throws {
        let frame = StackFrame(address: 0x7f3a_1229_e3c8, image: "/bin/app", offset: 0x1e3c8, symbol: "f")
        let thread = StallReport.ThreadSnapshot(
            threadId: 7, name: "worker", state: "S", waitAddress: 0x55d0_a010_0040, frames: [frame])
        let image = ImageInfo(path: "/bin/app", buildId: nil, base: 0x7f3a_1228_0000, size: 0x3000)
        let encoder = StallReport.makeEncoder()
        let frameJSON = try #require(
            try JSONSerialization.jsonObject(with: encoder.encode(frame)) as? [String: Any])
        #expect(frameJSON["address"] as? String == "0x7f3a1229e3c8")
        #expect(frameJSON["offset"] as? String == "0x1e3c8")
        let threadJSON = try #require(
            try JSONSerialization.jsonObject(with: encoder.encode(thread)) as? [String: Any])
        #expect(threadJSON["waitAddress"] as? String == "0x55d0a0100040")
        let imageJSON = try #require(
            try JSONSerialization.jsonObject(with: encoder.encode(image)) as? [String: Any])
        #expect(imageJSON["base"] as? String == "0x7f3a12280000")
        #expect(imageJSON["size"] as? Int == 0x3000)

        let decoder = StallReport.makeDecoder()
        #expect(try decoder.decode(StackFrame.self, from: encoder.encode(frame)) == frame)
        #expect(try decoder.decode(StallReport.ThreadSnapshot.self, from: encoder.encode(thread)) == thread)
        #expect(try decoder.decode(ImageInfo.self, from: encoder.encode(image)) == image)
        let bare = try decoder.decode(StackFrame.self, from: Data(#"{"address": "7f3a1229e3c8"}"#.utf8))
        #expect(bare.address == 0x7f3a_1229_e3c8 && bare.offset == nil)
    }

    @Test func frameKindsRoundTripAndAnUnknownKindReadsAsAnOrdinaryFrame() throws {
        let encoder = StallReport.makeEncoder()
        let decoder = StallReport.makeDecoder()
        for kind in [StackFrame.Kind.async, .stackSwitch] {
            var frame = StackFrame(address: 0x404fe5, image: "/srv/app", offset: 0x4fe5, symbol: "runtime.cgocall")
            frame.kind = kind
            let json = try #require(try JSONSerialization.jsonObject(with: encoder.encode(frame)) as? [String: Any])
            #expect(json["kind"] as? String == kind.rawValue)
            #expect(try decoder.decode(StackFrame.self, from: encoder.encode(frame)) == frame)
        }
        let later = try decoder.decode(StackFrame.self, from: Data(#"{"address": "0x10", "kind": "fibre"}"#.utf8))
        #expect(later.kind == nil)
    }

    @Test func anAddressThatIsNotHexIsADecodingError() {
        #expect(throws: DecodingError.self) {
            try StallReport.makeDecoder().decode(StackFrame.self, from: Data(#"{"address": "main+4"}"#.utf8))
        }
    }
}
