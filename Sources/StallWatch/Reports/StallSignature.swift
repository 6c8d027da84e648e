// The stall signature: what makes two stalls "the same" across runs, hosts and address-space layouts.

/// Computes a report's signature from image + function offset of the top frames of its dominant stack.
public enum StallSignature {
    /// Frames of the dominant stack that make up the signature.
    public static let frameCount = 5

    /// A frame's identity independent of ASLR and of where in the function the thread was: the image's file
    /// name and the offset of the function's start (the frame's own offset when the symbol is unknown).
    public static func key(_ frame: StackFrame) -> String {
        let image = frame.image.map { String($0.split(separator: "/").last ?? "") } ?? "?"
        guard let offsetText = frame.offset, let offset = UInt64(hexAddress: offsetText) else {
            return "\(image)+\(frame.address)"
        }
        if let symbolOffset = frame.symbolOffset, symbolOffset >= 0, UInt64(symbolOffset) <= offset {
            return "\(image)+\((offset - UInt64(symbolOffset)).hexAddress)"
        }
        return "\(image)+\(offsetText)"
    }

    /// The stack most samples share, comparing frames by function (``key(_:)``), and how many samples share it.
    /// Stacks of fewer than two frames are never chosen. On a tie, the earliest wins.
    public static func dominantStack(of samples: [StallReport.Sample]) -> StallReport.PointStack? {
        var counts: [[String]: (count: Int, first: Int)] = [:]
        for (index, sample) in samples.enumerated() where sample.frames.count >= 2 {
            let stackKey = sample.frames.map(key)
            let entry = counts[stackKey] ?? (0, index)
            counts[stackKey] = (entry.count + 1, entry.first)
        }
        guard let best = counts.max(by: { ($0.value.count, -$0.value.first) < ($1.value.count, -$1.value.first) })
        else { return nil }
        return .init(frames: samples[best.value.first].frames, count: best.value.count)
    }

    /// 16 hex digits of FNV-1a over the keys of the top frames of `stack`; "unknown" without a stack.
    public static func compute(stack: [StackFrame]?) -> String {
        guard let stack, !stack.isEmpty else { return "unknown" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for frame in stack.prefix(frameCount) {
            for byte in (key(frame) + ";").utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The signature of the samples' dominant stack.
    public static func compute(samples: [StallReport.Sample]) -> String {
        compute(stack: dominantStack(of: samples)?.frames)
    }
}
