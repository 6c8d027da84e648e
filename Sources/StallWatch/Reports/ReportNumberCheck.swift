// ReportNumberCheck: names the integer field a decoder refused as out of range, instead of "invalid JSON".
import Foundation

/// Finds, in valid JSON that did not decode, the first integer field of the report schema whose number does
/// not fit its Swift type (`loop.threadId: 1e20`, `occurrences: -1.5`).
///
/// Foundation's decoder reports such a number with an empty coding path, which reads like broken JSON; this
/// walk runs only on that failure path and gives the field and the value instead.
enum ReportNumberCheck {
    /// The schema's integer members and the range of the type each decodes to.
    private static let integerKeys: [String: ClosedRange<Double>] = {
        let int32 = Double(Int32.min)...Double(Int32.max)
        let int = -9.223_372_036_854_775e18...9.223_372_036_854_775e18
        let uint64 = 0...1.844_674_407_370_955e19
        var keys: [String: ClosedRange<Double>] = [:]
        for key in ["pid", "threadId", "blockingThreadId", "deadlockedThreadIds", "waitingForThreadId"] {
            keys[key] = int32
        }
        for key in [
            "schemaVersion", "samplesTaken", "samplesFailed", "syscallNumber", "count", "selfCount", "total",
            "withoutStack", "symbolOffset", "line", "cpuCount", "occurrences",
        ] {
            keys[key] = int
        }
        for key in ["iteration", "voluntarySwitches", "involuntarySwitches", "cgroupThrottledPeriods"] {
            keys[key] = uint64
        }
        return keys
    }()

    /// `not a valid report: loop.threadId = 1e+20: not an integer in -2147483648…2147483647`, or nil when the
    /// data is not JSON or holds no such number.
    static func outOfRange(in data: Data) -> String? {
        guard let root = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
            return nil
        }
        return find(root, path: "", key: nil)
    }

    private static func find(_ value: Any, path: String, key: String?) -> String? {
        switch value {
        case let object as [String: Any]:
            for name in object.keys.sorted() {
                let child = path.isEmpty ? name : path + "." + name
                if let found = find(object[name]!, path: child, key: name) { return found }
            }
        case let array as [Any]:
            for (index, element) in array.enumerated() {
                if let found = find(element, path: "\(path)[\(index)]", key: key) { return found }
            }
        case let number as NSNumber:
            guard let key, let range = integerKeys[key], !(number is Bool) else { return nil }
            let double = number.doubleValue
            let text = number.stringValue
            let integral = double.isFinite && double == double.rounded()
            if !integral || !range.contains(double) || (range.upperBound > 1e19 && text.hasPrefix("-")) {
                return "not a valid report: \(path) = \(text): not an integer in "
                    + "\(description(range.lowerBound))…\(description(range.upperBound))"
            }
        default:
            break
        }
        return nil
    }

    private static func description(_ bound: Double) -> String {
        abs(bound) < 1e15 ? String(Int64(bound)) : String(format: "%.4g", bound)
    }
}
