import Testing

@testable import StallWatch

@Suite struct SmokeTests {
    @Test func hexAddressesRoundTrip() {
        #expect(UInt64(hexAddress: UInt64(0x7f00_dead_beef).hexAddress) == 0x7f00_dead_beef)
        #expect(UInt64(hexAddress: "zz") == nil)
    }
}
