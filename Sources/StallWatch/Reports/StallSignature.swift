// The stall signature: what makes two stalls "the same" across runs, hosts and address-space layouts.

/// Computes a report's signature from image + function offset of the top frames of its dominant stack.
package enum StallSignature {
    /// Frames of the dominant stack that make up the signature.
    static let frameCount = 5

    /// A frame's identity independent of ASLR and of where in the function the thread was: the image's file
    /// name and the offset of the function's start (the frame's own offset when the symbol is unknown).
    package static func key(_ frame: StackFrame) -> String {
        let image = frame.image.map { String($0.split(separator: "/").last ?? "") } ?? "?"
        guard let offset = frame.offset else { return "\(image)+\(frame.address.hexAddress)" }
        if let symbolOffset = frame.symbolOffset, symbolOffset >= 0, UInt64(symbolOffset) <= offset {
            return "\(image)+\((offset - UInt64(symbolOffset)).hexAddress)"
        }
        return "\(image)+\(offset.hexAddress)"
    }

    /// The samples worth aggregating: stacks of fewer than two frames (a failed unwind, garbage) are left out.
    static func aggregatable(_ samples: [StallReport.Sample]) -> [StallReport.Sample] {
        samples.filter { $0.frames.count >= 2 }
    }

    /// The dominant ("point") stack: the hot path of the samples' call tree.
    ///
    /// From the roots, descend into the heaviest child as long as it holds at least half of its parent's samples;
    /// the path walked, innermost first, is the point stack and the last node's count its weight. Unlike "the
    /// most frequent exact stack", this does not split a CPU-bound function's samples by whatever leaf it
    /// happened to be in (a clock read, a memcpy), so the function holding most samples wins.
    package static func dominantStack(of samples: [StallReport.Sample]) -> StallReport.PointStack? {
        dominantStack(of: CallTree(samples: aggregatable(samples)))
    }

    package static func dominantStack(of tree: CallTree) -> StallReport.PointStack? {
        guard var node = tree.roots.first else { return nil }
        var path = [node.frame]
        while let child = node.children.first, child.count * 2 >= node.count {
            node = child
            path.append(node.frame)
        }
        guard path.count >= 2 else { return nil }
        return .init(frames: path.reversed(), count: node.count)
    }

    /// 16 hex digits of FNV-1a over the keys of the top frames of `stack`; "unknown" without a stack.
    package static func compute(stack: [StackFrame]?) -> String {
        guard let stack, !stack.isEmpty else { return "unknown" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for frame in stack.prefix(frameCount) {
            for byte in (key(frame) + ";").utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The signature of the samples' dominant stack.
    package static func compute(samples: [StallReport.Sample]) -> String {
        compute(stack: dominantStack(of: samples)?.frames)
    }
}
