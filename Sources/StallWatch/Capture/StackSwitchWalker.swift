// StackSwitchWalker: continues an unwind past a runtime's stack switch for a foreign call (Go's cgo), by the rules of
// StackSwitchRule (at the end: the table of trampolines).
import CStallWatchCore
import CStallWatchSymbols
import CStallWatchUnwind

#if canImport(Glibc)
    import Glibc
#endif

/// Continues an unwind that reached a stack-switch trampoline (``StackSwitchRule``) on the stack the runtime left,
/// with a frame-pointer walk.
///
/// The foreign code's frames unwind with DWARF CFI up to the trampoline; the walker then reads the saved context
/// from the trampoline's frame (in the stack copy), the other stack's bounds from the runtime's own structures, and
/// walks the frame-pointer chain from the frame pointer the CFI unwind restored for the trampoline's frame. Every
/// step is checked: the other stack lies outside the thread's own stack, frame pointers are aligned, rise strictly
/// and stay inside the other stack, and every return address lies in a loaded image; the walk stops at the first
/// that fails, and frames past the trampoline that the CFI unwind guessed are dropped.
///
/// The other stack is not in the copy (a capture copies the stack the thread runs on): it is read from the process
/// with `process_vm_readv` after the capture, while the target runs again. That is sound for a goroutine blocked in a
/// C call: only the goroutine itself grows (moves) its stack, and the garbage collector does not shrink the stack of
/// a goroutine in a system call or C call (`isShrinkStackSafe` refuses while `syscallsp` is set), so the stack stays
/// where the saved context says until the C call returns. If it returns meanwhile, the checks stop the walk.
struct StackSwitchWalker {
    /// Bytes of the other stack read, from its SP at the switch.
    static let maxStackBytes: UInt64 = 64 << 10
    /// A goroutine stack is at most 1 GB (`runtime/debug.SetMaxStack`'s default on 64-bit).
    static let maxStackSize: UInt64 = 1 << 30

    /// A trampoline found in one image.
    struct Trampoline {
        var rule: StackSwitchRule
        /// Addresses in the process.
        var range: Range<UInt64>
    }

    /// The unwind continued past a switch.
    struct Result {
        /// The frames up to the switch, then those of the other stack (the first of them `.stackSwitch`).
        var frames: [UnwoundFrame]
        /// Each frame's stack and frame pointer.
        var registers: [sw_unwind_frame]
        /// Why the unwind ended; nil when the walk reached the other stack's outermost frame.
        var error: String?
    }

    let processID: Int32
    let rules: [StackSwitchRule]
    private var images: ImageMap?
    /// Whether `images` was read again during the current call (at most once per unwind).
    private var refreshed = false
    /// Trampolines per image load base (empty for images of no runtime with rules), looked up once per image.
    private var trampolines: [UInt64: [Trampoline]] = [:]
    /// Lookups per image load base that could not read the image (it could not be opened, or libelf failed):
    /// tried again on later unwinds, up to `maxLookupAttempts`, rather than taken for an image without trampolines.
    private var failedLookups: [UInt64: Int] = [:]
    static let maxLookupAttempts = 5

    init(processID: Int32, rules: [StackSwitchRule] = StackSwitchRule.all) {
        self.processID = processID
        self.rules = rules
    }

    /// Forgets the images and their trampolines (a library unloaded; another may be loaded at its address).
    mutating func flush() {
        images = nil
        trampolines.removeAll()
        failedLookups.removeAll()
    }

    /// The unwind continued past the first stack switch in `frames` (a return address inside a trampoline), or
    /// nil when there is none.
    ///
    /// - Parameters:
    ///   - frames: The CFI unwind's frames, innermost first.
    ///   - registers: Each frame's stack and frame pointer, from the same unwind.
    mutating func continueAcrossSwitch(
        frames: [UnwoundFrame], registers: [sw_unwind_frame], capture: StackCapture, maxFrames: Int
    ) -> Result? {
        guard !rules.isEmpty, frames.count >= 2, registers.count == frames.count else { return nil }
        refreshed = false
        for index in 1..<frames.count {
            let address = frames[index].address
            guard let trampoline = trampoline(containing: address &- 1) else { continue }
            var result = Result(frames: Array(frames[...index]), registers: Array(registers[...index]), error: nil)
            let name = trampoline.rule.stackName
            guard callInstructionPrecedes(address, trampoline.rule.callInstruction) else {
                result.error = "a return address inside a stack-switch trampoline is not its foreign call"
                return result
            }
            switch trampoline.rule.layout {
            case .goSystemStackCall(let goroutineOffset, let depthOffset, let stackLowOffset, let stackHighOffset):
                let sp = registers[index].stack_pointer
                guard let goroutine = AsyncFrameWalker.stackWord(at: sp &+ goroutineOffset, in: capture),
                    let depth = AsyncFrameWalker.stackWord(at: sp &+ depthOffset, in: capture)
                else {
                    result.error = "stack switch: the trampoline's frame is outside the stack copy"
                    return result
                }
                guard goroutine != 0 else {
                    result.error = "stack switch: no \(name) saved (a foreign call from the system stack)"
                    return result
                }
                guard goroutine % 8 == 0, let low = liveWord(at: goroutine &+ stackLowOffset),
                    let high = liveWord(at: goroutine &+ stackHighOffset), low < high, high - low <= Self.maxStackSize,
                    depth >= 8, depth <= high - low, depth % 8 == 0
                else {
                    result.error = "stack switch: the saved \(name) is not plausible"
                    return result
                }
                let switchSP = high - depth
                // The thread's own stack (the system stack the C code runs on) is not the stack the runtime left.
                if capture.stackHigh > capture.stackLow, switchSP >= capture.stackLow, switchSP < capture.stackHigh {
                    result.error = "stack switch: the saved \(name) is the thread's own stack"
                    return result
                }
                walkFramePointers(
                    from: registers[index].frame_pointer, stackPointer: switchSP, stackHigh: high, name: name,
                    maxFrames: maxFrames, into: &result)
            }
            return result
        }
        return nil
    }

    /// Appends the return address at `stackPointer` and the frame-pointer chain from `framePointer`.
    private mutating func walkFramePointers(
        from framePointer: UInt64, stackPointer: UInt64, stackHigh: UInt64, name: String, maxFrames: Int,
        into result: inout Result
    ) {
        let length = min(stackHigh - stackPointer, Self.maxStackBytes)
        var stack = [UInt8](repeating: 0, count: Int(length))
        let read = stack.withUnsafeMutableBytes {
            sw_read_memory(processID, stackPointer, $0.baseAddress, UInt(length))
        }
        guard read == Int(length) else {
            result.error = "stack switch: the \(name) cannot be read (\(read < 0 ? "errno \(-read)" : "short read"))"
            return
        }
        let end = stackPointer + length
        func word(_ address: UInt64) -> UInt64? {
            guard address >= stackPointer, address % 8 == 0, address &+ 8 <= end, address &+ 8 > address else {
                return nil
            }
            let offset = Int(address - stackPointer)
            return stack.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        }
        // The switch SP holds the return address into the trampoline's caller.
        guard let first = word(stackPointer), isInImage(first) else {
            result.error = "stack switch: no return address at the \(name)'s saved stack pointer"
            return
        }
        var framePointer = framePointer
        result.frames.append(.stackSwitch(first))
        result.registers.append(sw_unwind_frame(stack_pointer: stackPointer &+ 8, frame_pointer: framePointer))
        var below = stackPointer
        while result.frames.count < maxFrames {
            guard framePointer > below, let caller = word(framePointer), let returnAddress = word(framePointer &+ 8)
            else {
                result.error =
                    framePointer &+ 16 > end && framePointer < stackHigh
                    ? "stack switch: the \(name) is deeper than the \(Self.maxStackBytes) bytes read"
                    : "stack switch: a frame pointer outside the \(name)"
                return
            }
            if returnAddress == 0 { return }
            guard isInImage(returnAddress) else {
                result.error = "stack switch: a return address outside any image on the \(name)"
                return
            }
            result.frames.append(.returnAddress(returnAddress))
            result.registers.append(sw_unwind_frame(stack_pointer: framePointer &+ 16, frame_pointer: caller))
            // The outermost frame saved no frame pointer (a goroutine starts with BP 0).
            if caller == 0 { return }
            below = framePointer
            framePointer = caller
        }
        result.error = "stopped at maxFrames (\(maxFrames))"
    }

    /// Whether `bytes` lie just before `returnAddress` in the process's code.
    private func callInstructionPrecedes(_ returnAddress: UInt64, _ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return true }
        var code = [UInt8](repeating: 0, count: bytes.count)
        let start = returnAddress &- UInt64(bytes.count)
        let read = code.withUnsafeMutableBytes { sw_read_memory(processID, start, $0.baseAddress, UInt($0.count)) }
        return read == bytes.count && code == bytes
    }

    private func liveWord(at address: UInt64) -> UInt64? {
        var value: UInt64 = 0
        let read = withUnsafeMutableBytes(of: &value) { sw_read_memory(processID, address, $0.baseAddress, 8) }
        return read == 8 ? value : nil
    }

    private mutating func image(containing address: UInt64) -> ImageMap.Image? {
        if images == nil { images = try? ImageMap(processID: processID) }
        if let image = images?.image(containing: address), image.isLoaded { return image }
        // A library loaded since the map was read: read it again, at most once per unwind (an address in no image,
        // JIT code or garbage, must not cost a read of the maps per frame).
        guard !refreshed else { return nil }
        refreshed = true
        images = try? ImageMap(processID: processID)
        return images?.image(containing: address).flatMap { $0.isLoaded ? $0 : nil }
    }

    private mutating func isInImage(_ address: UInt64) -> Bool { image(containing: address) != nil }

    /// The trampoline whose code contains `address`, looking up the rules' symbols in its image on first use.
    private mutating func trampoline(containing address: UInt64) -> Trampoline? {
        guard let image = image(containing: address) else { return nil }
        if trampolines[image.base] == nil, failedLookups[image.base, default: 0] < Self.maxLookupAttempts {
            if let found = lookUp(in: image) {
                trampolines[image.base] = found
            } else {
                failedLookups[image.base, default: 0] += 1
            }
        }
        return trampolines[image.base]?.first { $0.range.contains(address) }
    }

    /// The image's trampolines; nil when the image could not be read (tell that from an image without any).
    private func lookUp(in image: ImageMap.Image) -> [Trampoline]? {
        guard image.path.hasPrefix("/") else { return [] }  // the vDSO, an anonymous mapping: no runtime's image
        guard let identity = ImageIdentity(image: image, processID: processID) else { return nil }
        var found: [Trampoline] = []
        for rule in rules {
            let fd = identity.duplicateDescriptor()
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var ranges = [sw_function_range](repeating: sw_function_range(), count: rule.symbols.count)
            let names = rule.symbols.map { strdup($0) }
            defer { names.forEach { free($0) } }
            let count = names.map { UnsafePointer($0) }.withUnsafeBufferPointer { pointers in
                sw_symbols_find_functions(fd, rule.imageMarker, pointers.baseAddress, pointers.count, &ranges)
            }
            if count == -1 { return nil }  // libelf could not read it as ELF (a file being replaced, a failed map)
            guard count > 0 else { continue }  // -2: not the rule's runtime; 0: none of its symbols
            for range in ranges where range.size > 0 {
                found.append(
                    Trampoline(
                        rule: rule, range: (image.base &+ range.offset)..<(image.base &+ range.offset &+ range.size)))
            }
        }
        return found
    }
}

/// A function through which a language runtime calls foreign (C) code on a stack of its own, and where it leaves
/// the stack it came from, so that an unwind that reaches the trampoline can continue on the caller's stack.
///
/// A return-address unwind of the foreign code (DWARF CFI) reaches the trampoline's frame and then has nothing to go
/// on: the trampoline has no unwind information and its caller's frames are on another stack. Each rule says how
/// that stack is found from the trampoline's frame, and is documented with where the layout comes from and for which
/// runtime versions it was checked. Rules are matched by symbol name in images that carry the runtime's marker
/// section; an image without a symbol table (stripped) matches no rule, and the unwind ends at the foreign code's
/// outermost frame, as it would without rules.
struct StackSwitchRule: Sendable {
    /// How the caller's stack is found from the trampoline's frame.
    enum Layout: Sendable {
        /// Go's `runtime.asmcgocall` on amd64: after switching to the system (g0) stack it stores, in its own frame
        /// on that stack, the goroutine (`g*`) at `goroutineOffset(SP)` and the goroutine stack's depth (`g.stack.hi`
        /// minus the goroutine's SP at the switch) at `depthOffset(SP)`, then calls the C function. `g.stack` is the
        /// first field of `g`: `lo` at `stackLowOffset`, `hi` at `stackHighOffset`. The goroutine's SP at the switch
        /// points at the return address into `runtime.cgocall`, and Go amd64 keeps frame pointers, so RBP, which the
        /// C code preserves and the CFI unwind restores, is `runtime.cgocall`'s frame pointer: a frame-pointer walk
        /// from it reaches the Go callers up to `runtime.main` or `runtime.goexit`.
        case goSystemStackCall(
            goroutineOffset: UInt64, depthOffset: UInt64, stackLowOffset: UInt64, stackHighOffset: UInt64)
    }

    /// What the stack past the switch is called in notes ("goroutine stack").
    let stackName: String
    /// A section that only the runtime's images have, checked before their symbol table is read.
    let imageMarker: String
    /// The trampoline's symbol names; a return address inside any of them is a switch.
    let symbols: [String]
    /// The bytes of the trampoline's call of the foreign function, just before the return address: a return address
    /// that does not follow them is not the call site the layout describes.
    let callInstruction: [UInt8]
    let layout: Layout

    /// Go 1.19 on linux/amd64 (`src/runtime/asm_amd64.s`, `asmcgocall`: `MOVQ DI, 48(SP)` saves g, `MOVQ DI, 40(SP)`
    /// the depth, then `CALL AX`, bytes `ff d0`; `src/runtime/runtime2.go`: `g.stack` first, `stack{lo, hi}`), checked
    /// in a running cgo program. With the register ABI (Go 1.17 and later) the assembly function is
    /// `runtime.asmcgocall.abi0` and `runtime.asmcgocall` is a wrapper; earlier releases have only the latter. Its
    /// `nosave` path (a call made on the system stack already, no switch) stores 0 as the goroutine: no switch to
    /// follow, and the walk stops there.
    static let goCgoCall = StackSwitchRule(
        stackName: "goroutine stack", imageMarker: ".go.buildinfo",
        symbols: ["runtime.asmcgocall.abi0", "runtime.asmcgocall"], callInstruction: [0xff, 0xd0],
        layout: .goSystemStackCall(goroutineOffset: 48, depthOffset: 40, stackLowOffset: 0, stackHighOffset: 8))

    /// Every rule the unwinder applies.
    static let all: [StackSwitchRule] = [goCgoCall]
}
