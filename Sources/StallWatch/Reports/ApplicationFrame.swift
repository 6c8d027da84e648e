// ApplicationFrame: the one definition of a stall's "top frame", the first frame of the application's own code.

/// The frame a stall is named after: in the point stack (else the first sample with frames), the innermost frame
/// with a symbol that is not machinery and lies outside system and runtime libraries; failing that, the innermost
/// named frame that is not machinery; failing that, the innermost frame in an image (image + offset); failing
/// that, the innermost address.
///
/// `__lll_lock_wait` in libc is where a loop waits; the caller in the application is why. Every tool that names
/// a stall — event lines, log records, `reports list`, `reports summary`, the HTML page — uses this, so they name
/// the same function for the same stall.
package struct ApplicationFrame: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The symbol's readable name (``StackFrame/readableName``); or the image's file name when the frame has no symbol; or the address.
    package var name: String
    /// The symbol offset (decimal), or the offset in the image (hex) when there is no symbol.
    package var offset: String?

    package init(name: String, offset: String? = nil) {
        self.name = name
        self.offset = offset
    }

    /// `symbol + 40`, `libc.so.6 + 0xa1000` or `0x7f3a…`.
    package var description: String { offset.map { "\(name) + \($0)" } ?? name }

    /// The function without its `+ offset`; a frame without a symbol keeps image + offset, all there is of it.
    package var function: String {
        name.hasPrefix("0x") || offset?.hasPrefix("0x") == true ? description : name
    }

    /// The application frame of `frames` (innermost first); nil when there are none.
    package init?(frames: [StackFrame]) {
        let named = { (frame: StackFrame) in frame.readableName.map { !Self.isMachinery($0) } ?? false }
        if let own = frames.first(where: { named($0) && $0.image.map { !Self.isSystemImage($0) } ?? false }),
            let symbol = own.readableName
        {
            self.init(name: symbol, offset: own.symbolOffset.map(String.init))
        } else if let any = frames.first(where: named), let symbol = any.readableName {
            self.init(name: symbol, offset: any.symbolOffset.map(String.init))
        } else if let placed = frames.first(where: { $0.image != nil && $0.offset != nil }), let image = placed.image {
            self.init(name: Self.imageName(image), offset: placed.offset?.hexAddress)
        } else if let first = frames.first {
            self.init(name: first.address.hexAddress)
        } else {
            return nil
        }
    }

    /// Symbols that say nothing about the stall: signal trampolines, StallWatch's own C capture code (`sw_…`),
    /// and the run loop's idle wait.
    package static func isMachinery(_ symbol: String) -> Bool {
        ["__restore_rt", "__kernel_rt_sigreturn", "_sigtramp"].contains(symbol) || symbol.hasPrefix("sw_")
            || symbol.contains("idleWait")
    }

    /// A shared library of the system or of the Swift runtime, whose frames say less about a stall than the
    /// first frame of the application's own code.
    static func isSystemImage(_ path: String) -> Bool {
        let name = imageName(path)
        return path.hasPrefix("/lib/") || path.hasPrefix("/lib64/") || path.hasPrefix("/usr/lib/")
            || path.hasPrefix("/usr/lib64/") || path.contains("/swift/linux/") || name.hasPrefix("ld-linux")
            || name == "[vdso]"
    }

    /// The last path component of an image path (`/lib/x86_64-linux-gnu/libc.so.6` → `libc.so.6`).
    package static func imageName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}

extension StallReport {
    /// The stall's top frame (``ApplicationFrame``), from the point stack or else the first sample with frames.
    package var applicationFrame: ApplicationFrame? {
        guard let frames = pointStack?.frames ?? samples.first(where: { !$0.frames.isEmpty })?.frames else {
            return nil
        }
        return ApplicationFrame(frames: frames)
    }
}
