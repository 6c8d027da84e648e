// The stall signature: what makes two stalls "the same" across runs, hosts and address-space layouts.

/// Computes a report's signature from image + offset of the top frames of its dominant stack.
public enum StallSignature {
    /// Frames of the dominant stack that make up the signature.
    public static let frameCount = 5

    /// The most frequent stack among samples with at least two frames (the first such one on a tie).
    public static func dominantStack(of samples: [StallReport.Sample]) -> [StackFrame]? {
        var counts: [[String]: (count: Int, first: Int)] = [:]
        for (index, sample) in samples.enumerated() where sample.frames.count >= 2 {
            let key = sample.frames.map(\.address)
            let entry = counts[key] ?? (0, index)
            counts[key] = (entry.count + 1, entry.first)
        }
        guard let best = counts.max(by: { ($0.value.count, -$0.value.first) < ($1.value.count, -$1.value.first) })
        else { return nil }
        return samples[best.value.first].frames
    }

    /// 16 hex digits of FNV-1a over `image-basename+offset` of the top frames; "unknown" without a stack.
    public static func compute(samples: [StallReport.Sample]) -> String {
        guard let stack = dominantStack(of: samples) else { return "unknown" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for frame in stack.prefix(frameCount) {
            let image = frame.image.map { String($0.split(separator: "/").last ?? "") } ?? "?"
            for byte in "\(image)+\(frame.offset ?? frame.address);".utf8 {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
