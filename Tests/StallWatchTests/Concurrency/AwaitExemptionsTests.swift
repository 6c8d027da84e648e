// Await-site exemptions: patterns, `default`, generic arguments ignored; the configuration keys that set them.
import Foundation
import Testing

@testable import StallWatch

@Suite(.offPool) struct AwaitExemptionsTests {
    static func frame(_ symbol: String) -> StackFrame { StackFrame(address: 0x1000, symbol: symbol) }

    @Test func defaultStandsForSleepsStreamsAndNIOInboundStreams() {
        let exemptions = AwaitExemptions(setting: "default, MyServer.acceptLoop")
        #expect(exemptions.patterns.contains("Task.sleep"))
        #expect(exemptions.patterns.contains("AsyncStream._Storage.next"))
        #expect(exemptions.patterns.last == "MyServer.acceptLoop")
        #expect(
            exemptions.match([Self.frame("static Swift.Task<A, B>.sleep(for: Swift.Duration) async throws -> ()")])
                != nil)
        #expect(exemptions.match([Self.frame("MyServer.acceptLoop() async -> ()")]) == "MyServer.acceptLoop")
        #expect(exemptions.match([Self.frame("MyServer.handle(request: MyServer.Request) async -> ()")]) == nil)
    }

    @Test func aStarMatchesAnyTextAndGenericArgumentsAreIgnored() {
        let exemptions = AwaitExemptions(setting: "Queue*.next")
        #expect(exemptions.match([Self.frame("MyQueue<Swift.Int>.Consumer.poll() async -> Swift.Int?")]) == nil)
        #expect(exemptions.match([Self.frame("QueueConsumer<Swift.Int>.next() async -> Swift.Int?")]) == "Queue*.next")
        #expect(AwaitExemptions.withoutGenericArguments("Task<(), Never>._sleep<A>(until:)") == "Task._sleep(until:)")
        #expect(AwaitExemptions(setting: " , ").patterns.isEmpty)
    }

    @Test func theThresholdAndTheExemptionsAreConfigurationKeysWithEnvironmentVariables() throws {
        let configuration = try StallWatchConfiguration.load(
            environment: [
                "STALLWATCH_HUNG_AWAIT_THRESHOLD_MS": "2500", "STALLWATCH_HUNG_AWAIT_EXEMPTIONS": "default,Poller.wait",
            ])
        #expect(configuration.hungAwaitThresholdMs == 2500)
        #expect(configuration.hungAwaitExemptions == "default,Poller.wait")
        #expect(StallWatchConfiguration().hungAwaitThresholdMs == 10_000)
        #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(environment: ["STALLWATCH_HUNG_AWAIT_THRESHOLD_MS": "-1"])
        }
    }
}
