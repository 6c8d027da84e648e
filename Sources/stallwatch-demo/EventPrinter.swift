// Prints stall events as one JSON line each, for people and log shippers alike.
import StallWatch

enum EventPrinter {
    static func print(_ event: StallEvent) {
        JSONLinesEventWriter.standardOutput.write(event)
    }
}
